package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/api"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

func agentsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "agents",
		Short: "List the agent registry: the agent manifests of the loaded packs",
		Long: "List the agent manifests the loaded packs install (agents.manifestRuntime): id, pack,\n" +
			"digest, the prompt its systemPromptRef resolved to, and its tool allowlist. --json prints\n" +
			"each entry with its canonical manifest. The registry is read-only: it changes only when\n" +
			"the packs do.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withHost(func(_ context.Context, h *host.Host) error {
				if !h.Registry().Has(wop.FamilyAgents, agentruntime.FacetManifestRuntime) {
					return g.printRefusal(api.ErrAgentsNotServed())
				}
				return g.printAgents(h.Agents())
			})
		},
	}
}

func (g *globals) printAgents(list []*agents.Entry) error {
	if g.json {
		if list == nil {
			list = []*agents.Entry{}
		}
		return g.encode(list)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPACK\tDIGEST\tPROMPT\tTOOLS\tDESCRIPTION")
	for _, a := range list {
		prompt := a.SystemPrompt.Name + "@" + a.SystemPrompt.Version
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Pack, shortDigest(a.Digest), prompt,
			orDash(strings.Join(a.ToolAllowlist, ",")), oneLine(a.Description))
	}
	return tw.Flush()
}

// shortDigest keeps the algorithm and 12 hex digits, enough to tell
// manifests apart in a table; --json has the whole digest.
func shortDigest(d string) string {
	if algo, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return algo + ":" + hex[:12]
	}
	return d
}

// agentsForAPI is the GET /v1/agents hook: the registry while
// agents.manifestRuntime is advertised, else not found.
func agentsForAPI(b api.Backend) (any, bool) {
	h, ok := b.(*host.Host)
	if !ok || h == nil || !h.Registry().Has(wop.FamilyAgents, agentruntime.FacetManifestRuntime) {
		return nil, false
	}
	list := h.Agents()
	if list == nil {
		list = []*agents.Entry{}
	}
	return list, true
}
