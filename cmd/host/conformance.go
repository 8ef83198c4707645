package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/schema"
)

// conformanceFlags are the flags of conformance.
type conformanceFlags struct {
	file         string
	pluginConfig string
	calls        []string
	env          []string
	timeout      time.Duration
	verbose      bool
}

func conformanceCommand(g *globals) *cobra.Command {
	f := &conformanceFlags{}
	cmd := &cobra.Command{
		Use:   "conformance [flags] [PLUGIN_EXECUTABLE [ARGS...]]",
		Short: "Run the conformance kit against a plugin executable in any language; print a pass/fail table",
		Long: "Start the plugin as the host does (ARGS are passed to it, for an interpreter's script) and run\n" +
			"the kit of sdk/plugintest against it: the protocol checks, then the contract checks of every core\n" +
			"family it serves. The plugin's config and sample calls come from a conformance file (--config,\n" +
			"HCL or JSON; docs/conformance.md) or from flags. Prints every rule with its result and text;\n" +
			"the exit status is 1 when a rule fails, 2 on a usage error. Without PLUGIN_EXECUTABLE the\n" +
			"file's plugin block names it (executable, args): a launcher script, say.",
		Example: "  host conformance --config examples/plugins/kv/conformance.hcl bin/wophost-kv\n" +
			"  host conformance --call 'acme.kv.put={\"key\":\"k\",\"value\":\"v\"}' --plugin-config '{\"file\":\"kv.db\"}' bin/wophost-kv",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			return g.conformance(ctx, f, args)
		},
	}
	// Everything after the executable is its own arguments.
	cmd.Flags().SetInterspersed(false)
	// --config names the conformance file here; this command reads no
	// host config.
	cmd.Flags().StringVar(&f.file, "config", "", "conformance file (HCL, or JSON when it ends in .json): the plugin's config, sample calls, family checks")
	cmd.Flags().StringVar(&f.pluginConfig, "plugin-config", "", "the plugin's config as JSON, as the host sends it to Configure (replaces the file's config block)")
	cmd.Flags().StringArrayVar(&f.calls, "call", nil, `sample call FAMILY.METHOD[=JSON] that must succeed (repeatable; after the file's)`)
	cmd.Flags().StringArrayVar(&f.env, "env", nil, "KEY=VALUE for the plugin's environment (repeatable)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "print the plugin's log of a failed check to stderr")
	return cmd
}

// conformanceRule is one row of the --json output.
type conformanceRule struct {
	Rule   string            `json:"rule"`
	OK     bool              `json:"ok"`
	Result plugintest.Result `json:"result"`
	Text   string            `json:"text"`
	Detail string            `json:"detail,omitempty"`
	Log    string            `json:"log,omitempty"`
}

func (g *globals) conformance(ctx context.Context, f *conformanceFlags, command []string) error {
	cf := &conformanceFile{files: map[string]*hcl.File{}, ectx: conformanceEvalContext(".")}
	if f.file != "" {
		var diags hcl.Diagnostics
		cf, diags = loadConformanceFile(f.file)
		if err := g.conformanceDiagnostics(cf, diags); err != nil {
			return err
		}
	}
	// The command line's executable wins over the file's.
	if len(command) == 0 {
		if cf.executable == "" {
			return errors.New("no plugin executable: give PLUGIN_EXECUTABLE, or executable in the plugin block of --config")
		}
		command = append([]string{cf.executable}, cf.args...)
	}
	exe, args, err := pluginCommand(command[0], command[1:])
	if err != nil {
		return err
	}
	for _, c := range f.calls {
		call, err := parseCallFlag(c)
		if err != nil {
			return err
		}
		cf.calls = append(cf.calls, call)
	}
	if len(cf.calls) == 0 {
		return errors.New("no sample call: give at least one that succeeds, in a call block of --config or with --call FAMILY.METHOD=JSON")
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
	}
	cf.env = append(cf.env, f.env...)
	var pluginConfig json.RawMessage
	if f.pluginConfig != "" {
		if !json.Valid([]byte(f.pluginConfig)) {
			return fmt.Errorf("--plugin-config is not valid JSON: %s", f.pluginConfig)
		}
		pluginConfig = json.RawMessage(f.pluginConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	var block schema.Block
	if cf.needsSchema(pluginConfig) {
		_, s, err := plugintest.Inspect(ctx, plugintest.Config{Binary: exe, Args: args, Env: cf.env, StartTimeout: cf.startTimeout})
		if err != nil {
			// The config cannot be decoded without the plugin: the
			// report is that one failure.
			report := &plugintest.Report{Rules: []plugintest.Rule{{Name: "Protocol", Result: plugintest.Fail, Detail: err.Error(), Err: err,
				Text: "The plugin starts as the host starts it and answers Describe and ConfigSchema, whose schema decodes the config."}}}
			cf.locateStartFailures(report)
			if err := g.writeReport(report, f.verbose); err != nil {
				return err
			}
			return &exitError{code: 1}
		}
		block = s
	}
	suite, diags := cf.resolve(exe, args, block, pluginConfig)
	if err := g.conformanceDiagnostics(cf, diags); err != nil {
		return err
	}
	report := plugintest.Check(ctx, suite)
	cf.locateStartFailures(report)
	if err := g.writeReport(report, f.verbose); err != nil {
		return err
	}
	if report.Failed() {
		return &exitError{code: 1}
	}
	return nil
}

// locateStartFailures puts the place of the file's plugin block, which
// says how the plugin is started, before the detail of each rule that
// failed because the plugin did not start or exited before it served
// (the rules whose Err is set).
func (cf *conformanceFile) locateStartFailures(r *plugintest.Report) {
	if cf.pluginRange == nil {
		return
	}
	for i, x := range r.Rules {
		if x.Result == plugintest.Fail && x.Err != nil {
			r.Rules[i].Detail = config.FormatRange(*cf.pluginRange) + ": " + x.Detail
		}
	}
}

// conformanceDiagnostics prints diags with their place in the file and
// returns a usage error when one is an error. A schema the plugin
// reported wrong is the plugin's failure, not the file's.
func (g *globals) conformanceDiagnostics(cf *conformanceFile, diags hcl.Diagnostics) error {
	if len(diags) == 0 {
		return nil
	}
	if err := config.WriteDiagnostics(g.stderr, cf.files, diags); err != nil {
		return err
	}
	if !diags.HasErrors() {
		return nil
	}
	for _, d := range diags {
		if d.Summary == "Invalid plugin schema" {
			return &exitError{code: 1}
		}
	}
	return &exitError{code: 2}
}

// pluginCommand resolves the executable: a bare name that is no file here
// is looked up in PATH (an interpreter); one that does not exist is a
// usage error. The plugin runs in its
// executable's directory, as under the host, so an argument naming a file
// here is made absolute.
func pluginCommand(exe string, args []string) (string, []string, error) {
	if !strings.ContainsRune(exe, filepath.Separator) && !readable(exe) {
		p, err := exec.LookPath(exe)
		if err != nil {
			return "", nil, fmt.Errorf("plugin executable %s: %w", exe, err)
		}
		exe = p
	}
	if fi, err := os.Stat(exe); err != nil {
		return "", nil, fmt.Errorf("plugin executable: %w", err)
	} else if fi.IsDir() {
		return "", nil, fmt.Errorf("plugin executable %s is a directory", exe)
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if !strings.HasPrefix(a, "-") && readable(a) {
			if abs, err := filepath.Abs(a); err == nil {
				out[i] = abs
			}
		}
	}
	return exe, out, nil
}

// parseCallFlag parses --call FAMILY.METHOD[=JSON].
func parseCallFlag(s string) (plugintest.Call, error) {
	name, payload, hasPayload := strings.Cut(s, "=")
	i := strings.LastIndex(name, ".")
	if i <= 0 || i == len(name)-1 {
		return plugintest.Call{}, fmt.Errorf("--call %q: want FAMILY.METHOD[=JSON], such as acme.kv.get={\"key\":\"k\"}", s)
	}
	call := plugintest.Call{Family: name[:i], Method: name[i+1:]}
	if hasPayload {
		if !json.Valid([]byte(payload)) {
			return plugintest.Call{}, fmt.Errorf("--call %q: the payload is not valid JSON", s)
		}
		call.Payload = json.RawMessage(payload)
	}
	return call, nil
}

// writeReport prints the report: a table of every rule, then what broke
// each failed one, then the count; or the rules as JSON.
func (g *globals) writeReport(r *plugintest.Report, verbose bool) error {
	if g.json {
		rules := make([]conformanceRule, 0, len(r.Rules))
		for _, x := range r.Rules {
			row := conformanceRule{Rule: x.Name, OK: x.OK(), Result: x.Result, Text: x.Text, Detail: x.Detail}
			if verbose {
				row.Log = x.Log
			}
			rules = append(rules, row)
		}
		out := struct {
			OK    bool              `json:"ok"`
			Rules []conformanceRule `json:"rules"`
		}{!r.Failed(), rules}
		if err := g.encode(out); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tRESULT\tTEXT")
	counts := map[plugintest.Result]int{}
	for _, x := range r.Rules {
		counts[x.Result]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Name, strings.ToUpper(string(x.Result)), x.Text)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	for _, x := range r.Failures() {
		fmt.Fprintf(g.stdout, "\nFAIL %s: %s\n", x.Name, indent(x.Detail))
	}
	if verbose {
		for _, x := range r.Rules {
			if x.Result == plugintest.Fail && x.Log != "" {
				fmt.Fprintf(g.stderr, "log of %s:\n%s\n", x.Name, x.Log)
			}
		}
	}
	rules := "rules"
	if len(r.Rules) == 1 {
		rules = "rule"
	}
	_, err := fmt.Fprintf(g.stdout, "\n%d %s: %d passed, %d failed, %d skipped\n", len(r.Rules), rules, counts[plugintest.Pass], counts[plugintest.Fail], counts[plugintest.Skip])
	return err
}

// indent puts the lines of a multi-line detail under its rule.
func indent(s string) string {
	return strings.ReplaceAll(s, "\n", "\n    ")
}
