package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/config"
)

func validateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the config, every plugin and every pack; report all problems",
		Long: "Load the config, start every plugin and pack to check their config blocks and manifests,\n" +
			"report every problem found in one run followed by their count, and stop. The exit status\n" +
			"is 1 when any is found. When the file has errors of its own, the plugins and packs it\n" +
			"still declares well enough are checked too, against a temporary state directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			return g.validate(ctx)
		},
	}
}

// validation is the outcome of one validate run.
type validation struct {
	diags hcl.Diagnostics
	// files are the parsed config files, for the snippets.
	files map[string]*hcl.File
	// What the host had running once it started, for the summary of a
	// clean run.
	ready, capabilities, loaded, packs int
}

func (g *globals) validate(ctx context.Context) error {
	v, err := g.check(ctx)
	if err != nil {
		return err
	}
	problems := len(v.diags.Errs())
	if g.json {
		texts := make([]string, 0, len(v.diags))
		for _, d := range v.diags {
			texts = append(texts, diagnosticText(d))
		}
		out := map[string]any{"valid": problems == 0, "count": problems, "problems": texts}
		if err := g.encode(out); err != nil {
			return fmt.Errorf("write the result: %w", err)
		}
	} else {
		if err := config.WriteDiagnostics(g.stderr, v.files, v.diags); err != nil {
			return err
		}
		if problems > 0 {
			fmt.Fprintf(g.stderr, "%s: %s%s\n", g.configPath, countProblems(problems), countWarnings(len(v.diags)-problems))
		} else {
			fmt.Fprintf(g.stdout, "%s: no problems%s; %d of %d capabilities ready, %d of %d packs loaded\n", g.configPath,
				countWarnings(len(v.diags)-problems), v.ready, v.capabilities, v.loaded, v.packs)
		}
	}
	if problems > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// check loads the config and starts the host it describes, collecting
// every diagnostic of both. A config with errors still has its plugins
// and packs checked, those it declares well enough (see checkable): the
// problems of the host block must not hide those of a plugin's config.
func (g *globals) check(ctx context.Context) (*validation, error) {
	cfg, ldr, diags := g.readConfig()
	v := &validation{diags: diags, files: ldr.Files()}
	if cfg == nil {
		return v, nil
	}
	run := cfg
	if diags.HasErrors() {
		var cleanup func()
		var err error
		if run, cleanup, err = checkable(cfg, ldr, diags); err != nil {
			return nil, err
		}
		defer cleanup()
	}
	logger := g.logger(run)
	if g.logLevel == "" {
		logger.SetLevel(hclog.Off)
	}
	h := g.newHost(run, ldr, logger)
	rep := h.Start(ctx)
	v.ready, v.capabilities = countReady(h), len(run.Capabilities)
	v.loaded, v.packs = len(h.Packs())-countRefused(h), len(run.Packs)
	h.Close()
	v.diags = append(v.diags, rep.All()...)
	sortDiagnostics(v.diags)
	return v, nil
}

// checkable returns the part of cfg, a config with errors, whose plugins
// and packs can still be checked, with a temporary state directory that
// cleanup removes: what a config with errors names is not trusted with
// the real one. A block is left out when its own errors would make its
// check say nothing new: no name, a name declared before, no usable
// plugin or path, or a bare plugin name while plugin_dir is broken.
func checkable(cfg *config.Config, ldr *config.Loader, diags hcl.Diagnostics) (*config.Config, func(), error) {
	stateDir, err := os.MkdirTemp("", "wophost-validate-")
	if err != nil {
		return nil, nil, fmt.Errorf("create a temporary state directory: %w", err)
	}
	run := *cfg
	run.Host.StateDir = stateDir
	pluginDirOK := true
	if rng, ok := hostAttrRange(ldr.Files(), "plugin_dir"); ok && hasErrorIn(diags, rng) {
		pluginDirOK = false
	}
	run.Capabilities = nil
	seen := map[string]bool{}
	for _, c := range cfg.Capabilities {
		if c.Name == "" || seen[c.Name] || c.PluginPath == "" || !pluginDirOK && !strings.ContainsAny(c.Plugin, `/\`) {
			continue
		}
		seen[c.Name] = true
		cc := *c
		cc.Families = distinctNonEmpty(c.Families)
		run.Capabilities = append(run.Capabilities, &cc)
	}
	run.Packs = nil
	seen = map[string]bool{}
	for _, p := range cfg.Packs {
		if p.Name == "" || seen[p.Name] || p.Path == "" {
			continue
		}
		seen[p.Name] = true
		run.Packs = append(run.Packs, p)
	}
	return &run, func() { _ = os.RemoveAll(stateDir) }, nil
}

// distinctNonEmpty drops the empty and repeated entries of a families
// list, already reported as errors, which would only make the plugin's
// check fail again.
func distinctNonEmpty(list []string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// hostAttrRange finds the attribute name of the host block in files (a
// config is one file), for telling which setting a diagnostic is about.
func hostAttrRange(files map[string]*hcl.File, name string) (hcl.Range, bool) {
	for _, f := range files {
		content, _, _ := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "host"}}})
		if content == nil {
			continue
		}
		for _, b := range content.Blocks {
			attrs, _, _ := b.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
			if attrs == nil {
				continue
			}
			if a, ok := attrs.Attributes[name]; ok {
				return a.Range, true
			}
		}
	}
	return hcl.Range{}, false
}

// hasErrorIn reports whether an error of diags lies within rng.
func hasErrorIn(diags hcl.Diagnostics, rng hcl.Range) bool {
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename == rng.Filename &&
			d.Subject.Start.Byte >= rng.Start.Byte && d.Subject.End.Byte <= rng.End.Byte {
			return true
		}
	}
	return false
}
