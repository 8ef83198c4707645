package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/host"
)

func effectsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "effects",
		Short: "List the effect seams: the side-effecting host-service methods and what guards them on replay",
		Long: "List OpenWOP's effect-seam manifest of the families this host advertises: one seam per\n" +
			"method that is not pure, with its kind and a note naming the mechanism. A replay answers\n" +
			"every seam from the source run's invocation log; a --live branch performs it again.\n" +
			"--json prints the manifest `host serve` answers at GET /host/effect-seams.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withHostFor(true, func(_ context.Context, h *host.Host) error {
				return g.printEffects(h.EffectSeams())
			})
		},
	}
}

func (g *globals) printEffects(m host.EffectManifest) error {
	if g.json {
		return g.encode(m)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEAM\tKIND\tNOTE")
	for _, s := range m.Seams {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Seam, s.Kind, orDash(oneLine(s.Note)))
	}
	return tw.Flush()
}
