package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// callFlags are the flags of run and call.
type callFlags struct {
	input          string
	timeout        time.Duration
	idempotencyKey string
}

func (f *callFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.input, "input", "", `input JSON file, or "-" for standard input (default: {})`)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "deadline for the whole call or run, e.g. 30s (default: the host block's call_timeout for host call, run_timeout for host run)")
	cmd.Flags().StringVar(&f.idempotencyKey, "idempotency-key", "", "idempotency key carried in the call context")
}

func (f *callFlags) read(stdin io.Reader) (json.RawMessage, error) {
	var data []byte
	var err error
	switch f.input {
	case "":
		return json.RawMessage("{}"), nil
	case "-":
		data, err = io.ReadAll(stdin)
	default:
		data, err = os.ReadFile(f.input)
	}
	if err != nil {
		return nil, fmt.Errorf("read --input: %w", err)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("--input %s is not valid JSON", f.input)
	}
	return data, nil
}

func (f *callFlags) options() host.RunOptions {
	return host.RunOptions{Timeout: f.timeout, IdempotencyKey: f.idempotencyKey}
}

// printError writes the ctx-level error envelope {code, message,
// capability, retryable, details} to stdout and returns exit code 1: the
// answer of a failed ctx call (host call).
func (g *globals) printError(err error) error {
	return g.printFailure(wop.AsError(err))
}

// printRefusal writes the OpenWOP error envelope {error, message, details}
// the HTTP API answers a refused request with to stdout and returns exit
// code 1.
func (g *globals) printRefusal(err error) error {
	_, env := httpstatus.Refusal(err)
	return g.printFailure(env)
}

// printOutcome writes the outcome of a node that ran and failed, as the
// HTTP API answers it, to stdout and returns exit code 1.
func (g *globals) printOutcome(runID string, err error) error {
	return g.printFailure(httpstatus.NewOutcome(runID, nil, err))
}

func (g *globals) printFailure(v any) error {
	if err := writeJSON(g.stdout, v, true); err != nil {
		return err
	}
	return &exitError{code: 1}
}

// printJSON prints raw, a JSON answer, indented, or compact with --json;
// bytes that are no JSON value are printed as they are.
func (g *globals) printJSON(raw []byte) {
	b, err := formatJSON(raw, !g.json)
	if err != nil {
		b = raw
	}
	fmt.Fprintf(g.stdout, "%s\n", b)
}

// withHost runs fn against a started host and stops the host afterwards.
func (g *globals) withHost(fn func(ctx context.Context, h *host.Host) error) error {
	return g.withHostFor(false, fn)
}

// withHostFor is withHost; listing is startHost's.
func (g *globals) withHostFor(listing bool, fn func(ctx context.Context, h *host.Host) error) error {
	ctx, stop := signalContext()
	defer stop()
	h, err := g.startHost(ctx, listing)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(ctx, h)
}

// refusedRecord reports whether err refuses the run record a replay
// names (pruned, or not to be trusted): printed as the error envelope,
// as HTTP answers it.
func refusedRecord(err error) bool {
	code := wop.CodeOf(err)
	return code == host.CodeRunExpired || code == dispatch.CodeReplaySourceMissing
}

func runCommand(g *globals) *cobra.Command {
	var f callFlags
	var rf replayFlags
	cmd := &cobra.Command{
		Use:   "run TYPEID",
		Short: "Run one node and print its output JSON",
		Long: "Run one node of a loaded pack and print its output JSON. A node that ran and failed\n" +
			"prints its outcome {runId, status: \"failed\", error: {code, message, capability, retryable,\n" +
			"details}}; a run refused before the node ran prints OpenWOP's error envelope {error, message,\n" +
			"details}; both are what `host serve` answers, and the exit status is 1.\n" +
			"Each run that reaches pack code leaves a run record (a file in state_dir/runs, or with the\n" +
			"postgres storage backend a row of the database), named on stderr; --replay RECORD, a file or a\n" +
			"run id, runs its node again with its input and its prompts' recorded digests.",
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var read func(string) (*host.RunRecord, error)
			if !rf.byRunID() {
				read = host.ReadRunRecord
			}
			typeID, input, opts, err := rf.resolve(args, &f, g.stdin, read)
			if refusedRecord(err) {
				return g.printRefusal(err)
			}
			if err != nil {
				return err
			}
			if opts.IdempotencyKey != "" {
				// Refused before any plugin starts; the host would refuse it too.
				if err := idempotency.CheckKey(opts.IdempotencyKey); err != nil {
					return g.printRefusal(err)
				}
			}
			return g.withHost(func(ctx context.Context, h *host.Host) error {
				if rf.byRunID() {
					var err error
					typeID, input, opts, err = rf.resolve(args, &f, g.stdin, func(id string) (*host.RunRecord, error) {
						return h.RunRecord(ctx, id)
					})
					if refusedRecord(err) {
						return g.printRefusal(err)
					}
					if err != nil {
						return err
					}
				}
				res, err := h.Run(ctx, typeID, input, opts)
				g.printRunRecord(res)
				switch {
				case err != nil && (res == nil || res.RunID == ""):
					return g.printRefusal(err)
				case err != nil:
					return g.printOutcome(res.RunID, err)
				}
				g.printJSON(res.Output)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("idempotency-key").Usage = "run at most once per key: a repeat with the same key, node and input prints the recorded\n" +
		"outcome without running the node (22-128 characters of A-Z a-z 0-9 . _ ~ -; kept for retention idempotency_keys)"
	rf.register(cmd)
	return cmd
}

func callCommand(g *globals) *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "call FAMILY.METHOD",
		Short: "Invoke one host service as a node would and print the raw result",
		Long: "Invoke one host service through the same routing and checks a pack node's ctx call\n" +
			"takes, and print the raw result. FAMILY may be a vendor family: acme.kv.get. A failed\n" +
			"call prints the ctx-level error envelope a node would get, {code, message, capability,\n" +
			"retryable, details}, and the exit status is 1.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			i := strings.LastIndexByte(args[0], '.')
			if i <= 0 || i == len(args[0])-1 {
				return fmt.Errorf("%q is not FAMILY.METHOD", args[0])
			}
			input, err := f.read(g.stdin)
			if err != nil {
				return err
			}
			return g.withHost(func(ctx context.Context, h *host.Host) error {
				out, err := h.Call(ctx, args[0][:i], args[0][i+1:], input, f.options())
				if err != nil {
					return g.printError(err)
				}
				g.printJSON(out)
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}

func capabilitiesCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "capabilities",
		Short: "Print the advertisement: the families and facets this host serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withHost(func(_ context.Context, h *host.Host) error {
				g.printJSON(h.Registry().Document())
				return nil
			})
		},
	}
}

func pluginsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "plugins",
		Short: "List every declared capability with its state and last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withHostFor(true, func(_ context.Context, h *host.Host) error {
				return g.printPlugins(h)
			})
		},
	}
}

func (g *globals) printPlugins(h *host.Host) error {
	recs := h.Registry().Records()
	if g.json {
		return g.encode(recs)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPABILITY\tSTATE\tPLUGIN\tVERSION\tADVERTISED\tERROR")
	for _, r := range recs {
		state := string(r.State)
		if r.FailedPhase != "" {
			state += " (" + string(r.FailedPhase) + ")"
		}
		problem := r.LastError
		if problem == "" && len(r.Warnings) > 0 {
			// A plugin that serves despite a config problem says so here.
			problem = "warning: " + strings.Join(r.Warnings, "; warning: ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, state, orDash(r.PluginName), orDash(r.PluginVersion),
			orDash(strings.Join(r.Advertised, ",")), orDash(oneLine(problem)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The facet rules vendor families declared, which a node's calls
	// are held to, one a line.
	for _, r := range recs {
		for _, fam := range slices.Sorted(maps.Keys(r.FacetRules)) {
			for _, rule := range r.FacetRules[fam] {
				fmt.Fprintf(g.stdout, "%s: %s\n", r.Name, describeFacetRule(fam, rule))
			}
		}
	}
	return nil
}

func packsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "packs",
		Short: "List every declared pack with its state and nodes; sign and verify packs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withHost(func(_ context.Context, h *host.Host) error {
				return g.printPacks(h)
			})
		},
	}
	cmd.AddCommand(packsSignCommand(g), packsVerifyCommand(g))
	return cmd
}

func (g *globals) printPacks(h *host.Host) error {
	packs := h.Packs()
	if g.json {
		return g.encode(packs)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PACK\tVERSION\tSTATE\tSANDBOX\tRUNS\tNODES\tDEGRADED\tERROR")
	for _, p := range packs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, orDash(p.Version), p.State, packSandboxColumn(p), orDash(p.Runs),
			orDash(strings.Join(p.Nodes, ",")), orDash(strings.Join(p.Degraded, ",")), orDash(oneLine(p.Error)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Notes are sentences, too long for a column: one a line below.
	for _, p := range packs {
		for _, n := range p.Notes {
			if _, err := fmt.Fprintf(g.stdout, "note: %s %s\n", p.Name, n); err != nil {
				return err
			}
		}
	}
	for _, p := range packs {
		if p.SignedBy == "" {
			continue
		}
		if _, err := fmt.Fprintf(g.stdout, "signed: %s by key %s\n", p.Name, p.SignedBy); err != nil {
			return err
		}
	}
	return nil
}

// packSandboxColumn is the SANDBOX column of `host packs`: "wasm" for a
// WebAssembly pack, which runs in the host's process held by its caps,
// and sandboxColumn for a process.
func packSandboxColumn(p host.PackInfo) string {
	if p.Runtime == packmanifest.LanguageWasm {
		return "wasm"
	}
	return sandboxColumn(p.Sandbox)
}

// sandboxColumn is the SANDBOX column of `host packs` for a process: whether the pack's
// process is contained and, when some rules cannot be enforced on this
// host, how many (the JSON output and the log name them).
func sandboxColumn(s *host.PackSandbox) string {
	if s == nil || !s.Contained {
		return "uncontained"
	}
	switch n := len(s.NotEnforced); n {
	case 0:
		return "contained"
	case 1:
		return "contained (1 rule not enforced)"
	default:
		return fmt.Sprintf("contained (%d rules not enforced)", n)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func countReady(h *host.Host) int {
	n := 0
	for _, r := range h.Registry().Records() {
		if r.State == registry.StateReady {
			n++
		}
	}
	return n
}

func countRefused(h *host.Host) int {
	n := 0
	for _, p := range h.Packs() {
		if p.State == host.PackRefused {
			n++
		}
	}
	return n
}

// describeFacetRule says what a facet rule asks of a call, as `host
// plugins` lists it.
func describeFacetRule(family string, r wop.FacetRule) string {
	method := family + "." + r.Method
	if r.Method == wop.EveryMethod {
		method = "every method of " + family
	}
	s := method + " needs the facet " + family + "." + r.Facet
	if r.When != "" {
		s += ` when the request sets "` + r.When + `": true`
	}
	return s
}
