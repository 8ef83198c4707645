package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/packsign"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// promptlibPlugin is the file name of the prompt library plugin; a
// capability block running it is the one the prompts commands use.
const promptlibPlugin = "wophost-promptlib"

// promptsCommand is the operator's side of the prompt library: publish
// .prompt files, inspect and verify the store, and lock a pack's prompts.
// Every command goes through the plugin that serves promptLibrary, started
// alone from the config, so the host knows no store's layout and a store
// shared by several hosts (a database) is managed the same way. The
// management methods are the operator's alone (docs/contract.md §4.2).
func promptsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prompts",
		Short: "Publish, list, show, verify and lock pinned prompts",
		Long: "Manage the prompt library's store through the plugin of the capability block that serves\n" +
			"promptLibrary (or runs " + promptlibPlugin + ") in the config. Only that plugin is started.",
	}
	lib := withLibrary(g.withPromptLibrary)
	cmd.AddCommand(promptsPublishCommand(g, lib), promptsListCommand(g, lib), promptsShowCommand(g, lib),
		promptsVerifyCommand(g, lib), promptsLockCommand(g, lib), promptsIndexCommand(g, lib))
	return cmd
}

// withLibrary runs fn against the prompt library.
type withLibrary func(fn func(ctx context.Context, lib *promptlibrary.Client) error) error

// withPromptLibrary starts the one capability of the config that serves
// promptLibrary, and no pack, runs fn against it as the operator, and
// stops it.
func (g *globals) withPromptLibrary(fn func(ctx context.Context, lib *promptlibrary.Client) error) error {
	cfg, ldr, err := g.loadConfig()
	if err != nil {
		return err
	}
	c, err := promptLibraryCapability(cfg, g.configPath)
	if err != nil {
		return err
	}
	only := *cfg
	only.Capabilities, only.Packs = []*config.Capability{c}, nil
	ctx, stop := signalContext()
	defer stop()
	h, err := g.startHostWith(ctx, &only, ldr)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, r := range h.Registry().Records() {
		if r.Name == c.Name && r.State != registry.StateReady {
			return fmt.Errorf("capability %q (%s) is not ready: %s", c.Name, c.PluginPath, r.LastError)
		}
	}
	return fn(ctx, promptlibrary.NewClient(host.AsOperator(h), nil))
}

// promptLibraryCapability returns the one capability block of cfg that
// serves promptLibrary or runs the prompt library plugin.
func promptLibraryCapability(cfg *config.Config, configPath string) (*config.Capability, error) {
	var found []*config.Capability
	for _, c := range cfg.Capabilities {
		if slices.Contains(c.Families, promptlibrary.Family) || filepath.Base(c.PluginPath) == promptlibPlugin {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s declares no capability serving %s (plugin %s)", configPath, promptlibrary.Family, promptlibPlugin)
	case 1:
		return found[0], nil
	default:
		return nil, fmt.Errorf("%s declares %d prompt library capabilities; keep one", configPath, len(found))
	}
}

// publishOutcome is one line of `prompts publish --json`.
type publishOutcome struct {
	File    string `json:"file"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// Existed is true when the same bytes were already published.
	Existed bool   `json:"existed"`
	Error   string `json:"error,omitempty"`
}

func promptsPublishCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "publish FILE...",
		Short: "Publish .prompt files as immutable versions",
		Long: "Publish each .prompt file, byte for byte, as a version of the prompt its header names:\n" +
			"the header's version, or the next integer when it has none. Publishing identical bytes\n" +
			"again changes nothing; different bytes under an existing version are refused. The exit\n" +
			"status is 1 when any file was refused.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			var outcomes []publishOutcome
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) error {
				for _, file := range args {
					outcomes = append(outcomes, publishOne(ctx, lib, file))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, o := range outcomes {
				file := o.File
				switch {
				case o.Error != "":
					failed = true
					if !g.json {
						fmt.Fprintf(g.stderr, "%s: %s\n", file, o.Error)
					}
				case g.json:
				case o.Existed:
					fmt.Fprintf(g.stdout, "unchanged  %s@%s  %s  (%s)\n", o.Name, o.Version, o.Digest, file)
				default:
					fmt.Fprintf(g.stdout, "published  %s@%s  %s  (%s)\n", o.Name, o.Version, o.Digest, file)
				}
			}
			if g.json {
				if err := g.encode(outcomes); err != nil {
					return err
				}
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

func publishOne(ctx context.Context, lib *promptlibrary.Client, file string) publishOutcome {
	o := publishOutcome{File: file}
	fi, err := os.Stat(file)
	if err == nil && fi.Size() > promptfile.MaxBytes {
		err = fmt.Errorf("file is %d bytes, over the %d-byte limit", fi.Size(), promptfile.MaxBytes)
	}
	var raw []byte
	if err == nil {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		o.Error = err.Error()
		return o
	}
	res, err := lib.Publish(ctx, raw)
	if err != nil {
		o.Error = err.Error()
		return o
	}
	o.Name, o.Version, o.Digest, o.Existed = res.Name, res.Version.Version, res.Digest, res.Existed
	return o
}

func promptsListCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME]",
		Short: "List prompt names, or the versions of one name",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				var vs []promptlibrary.Version
				err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
					vs, err = lib.Versions(ctx, args[0])
					return err
				})
				if err != nil {
					return err
				}
				if g.json {
					return g.encode(vs)
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tDIGEST\tPUBLISHED\tBYTES\tDESCRIPTION")
				for _, v := range vs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", v.Version, v.Digest, v.PublishedAt.Format(time.RFC3339), v.Size, orDash(oneLine(v.Description)))
				}
				return tw.Flush()
			}
			var entries []promptlibrary.NameSummary
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
				entries, err = lib.List(ctx)
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				return g.encode(entries)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSIONS\tLAST PUBLISHED\tDIGEST")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", e.Name, e.Versions, e.Last, e.Digest)
			}
			return tw.Flush()
		},
	}
}

func promptsIndexCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "index",
		Short: "Rebuild the store's optional index from its records",
		Long: "Rebuild the store's index from the version records (the file store's index.sqlite). The\n" +
			"index only speeds up list on large stores; once it exists every publish keeps it complete,\n" +
			"and deleting it loses nothing. A store without an index refuses.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res *promptlibrary.ReindexResult
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
				res, err = lib.Reindex(ctx)
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				return g.encode(map[string]any{"index": res.Index, "versions": res.Versions})
			}
			fmt.Fprintf(g.stdout, "%s: %d versions indexed\n", res.Index, res.Versions)
			return nil
		},
	}
}

func promptsShowCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "show REF",
		Short: "Print one pinned version's stored bytes exactly",
		Long: "Print the exact stored bytes of REF (name@<version>, name@sha256:<hex> or\n" +
			"name@<version>#sha256:<hex>), checked against their digest. With --json, print the\n" +
			"answer promptLibrary.get would give, plus the version record.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := promptlibrary.ParsePin(args[0]); err != nil {
				return err
			}
			var ans *promptlibrary.Prompt
			var rec *promptlibrary.Version
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
				// get goes through the host's checks of the answer's bytes
				// against its digest, as a node's get does.
				if ans, err = lib.Get(ctx, &promptlibrary.GetRequest{PromptID: args[0]}); err != nil || !g.json {
					return err
				}
				rec, err = lib.Resolve(ctx, args[0])
				return err
			})
			if err != nil {
				return err
			}
			if !g.json {
				_, err := io.WriteString(g.stdout, ans.Raw)
				return err
			}
			return g.encode(struct {
				*promptlibrary.Prompt
				Record *promptlibrary.Version `json:"record"`
			}{ans, rec})
		},
	}
}

func promptsVerifyCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Re-hash every stored version and report corruption",
		Long: "Re-read every version record and re-hash the bytes each one names, and look for blobs\n" +
			"no record names (orphans: a deleted record, or a publish stopped before its record).\n" +
			"Check every pin in the lock map of each pack the config declares against the store\n" +
			"(a pin whose version is gone, record and bytes, refuses its pack at load).\n" +
			"Every problem is listed with what to do; the exit status is 1 when there is any.\n" +
			"verify only reads: it never repairs or removes anything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res *promptlibrary.VerifyResult
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
				if res, err = lib.Verify(ctx); err != nil {
					return err
				}
				return g.checkPackPins(ctx, lib, &res.Report)
			})
			if err != nil {
				return err
			}
			rep := &res.Report
			if g.json {
				if err := g.encode(rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintf(g.stdout, "%-8s %s  %s: %s\n", strings.ToUpper(p.Kind), p.Ref, p.Path, p.Message)
				}
				for _, l := range rep.Leftovers {
					fmt.Fprintf(g.stdout, "leftover %s (an unfinished publish; safe to delete)\n", l)
				}
				fmt.Fprintf(g.stdout, "%s: %d names, %d versions, %d blobs, %d pack pins checked, %s\n",
					res.Store, rep.Names, rep.Versions, rep.Blobs, rep.Pins, countProblems(len(rep.Problems)))
			}
			if !rep.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// checkPackPins resolves every pin in the lock maps of the packs the
// config declares and adds to rep a ProblemPin for each the store does
// not hold: the host refuses such a pack at load, and the store alone
// cannot tell, since a version whose record and bytes are both gone
// leaves nothing behind. A pack.json that cannot be read is reported on
// stderr and skipped; loading the pack says why.
func (g *globals) checkPackPins(ctx context.Context, lib *promptlibrary.Client, rep *promptlibrary.Report) error {
	cfg, _, diags := config.Load(g.configPath)
	if diags.HasErrors() || cfg == nil {
		return fmt.Errorf("%s: %s", g.configPath, config.FormatDiagnostics(diags))
	}
	for _, pc := range cfg.Packs {
		path := filepath.Join(pc.Path, config.PackManifest)
		lock, err := readLockMap(path)
		if err != nil {
			fmt.Fprintf(g.stderr, "warning: pack %q: %v; its prompt pins are not checked\n", pc.Name, err)
			continue
		}
		names := make([]string, 0, len(lock))
		for name := range lock {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			pin := lock[name]
			rep.Pins++
			_, err := lib.Resolve(ctx, pin)
			switch wop.CodeOf(err) {
			case "":
				continue
			case promptlibrary.CodePromptNotFound, promptlibrary.CodePromptVersionNotFound, promptlibrary.CodePromptDigestMismatch:
				rep.Problems = append(rep.Problems, promptlibrary.Problem{
					Kind: promptlibrary.ProblemPin, Ref: pin, Path: path,
					Message: fmt.Sprintf("pack %s pins %q to %s, which the store does not hold (%v), so the host refuses the pack at load: publish that .prompt file again (host prompts publish FILE), or lock another version (host prompts lock %s %s)",
						pc.Name, name, pin, err, pc.Path, name),
				})
			default:
				return fmt.Errorf("pack %s: check the pin %s: %w", pc.Name, pin, err)
			}
		}
	}
	return nil
}

// readLockMap returns the prompt lock map of the pack.json at path, nil
// when it has none.
func readLockMap(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var lock map[string]string
	if raw, ok := m[packmanifest.PromptsKey]; ok {
		if err := json.Unmarshal(raw, &lock); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, packmanifest.PromptsKey, err)
		}
	}
	return lock, nil
}

func promptsLockCommand(g *globals, lib withLibrary) *cobra.Command {
	return &cobra.Command{
		Use:   "lock PACKDIR [NAME|REF...]",
		Short: "Pin a pack's prompts, with digests, in its pack.json lock map",
		Long: "Rewrite the lock map (\"x-wophost-prompts\") of PACKDIR/pack.json so that every entry is\n" +
			"name@<version>#sha256:<hex>, resolved against the store. Each NAME or REF given is\n" +
			"added or replaced under its name: a bare NAME locks the version published last, a REF\n" +
			"(name@<version> or name@sha256:<hex>) locks that version. Existing entries keep their\n" +
			"version and gain its digest. The rest of pack.json is left byte for byte; the host\n" +
			"ignores the lock map when it compares pack.json with the copy built into the binary.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := filepath.Join(args[0], config.PackManifest)
			var lock map[string]string
			err := lib(func(ctx context.Context, lib *promptlibrary.Client) (err error) {
				lock, err = lockPack(ctx, lib, path, args[1:])
				return err
			})
			if err != nil {
				return err
			}
			if g.json {
				return g.encode(lock)
			}
			keys := make([]string, 0, len(lock))
			for k := range lock {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(g.stdout, "%s = %s\n", k, lock[k])
			}
			fmt.Fprintf(g.stdout, "%s: %d prompt(s) locked\n", path, len(lock))
			// The lock map is part of what a signature covers.
			if _, err := os.Stat(filepath.Join(args[0], packsign.FileName)); err == nil {
				fmt.Fprintf(g.stderr, "warning: %s is signed and its signature covers the lock map: if the map changed, sign the pack again (host packs sign)\n", args[0])
			}
			return nil
		},
	}
}

// lockPack resolves the lock map of the pack.json at path plus refs
// through the prompt library and writes it back.
func lockPack(ctx context.Context, lib *promptlibrary.Client, path string, refs []string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, legacy := m["prompts"]; legacy {
		return nil, fmt.Errorf("%s: the lock map is spelled %q in OpenWOP v2 manifests: rename the \"prompts\" key, then lock again", path, packmanifest.PromptsKey)
	}
	var prompts map[string]string
	if raw, ok := m[packmanifest.PromptsKey]; ok {
		if err := json.Unmarshal(raw, &prompts); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, packmanifest.PromptsKey, err)
		}
	}
	lock := map[string]string{}
	for key, ref := range prompts {
		if _, err := promptlibrary.ParsePin(ref); err != nil {
			return nil, fmt.Errorf("%s: %s[%q]: %w", path, packmanifest.PromptsKey, key, err)
		}
		v, err := lib.Resolve(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %s[%q] = %q: %w", path, packmanifest.PromptsKey, key, ref, err)
		}
		lock[key] = v.Pin().String()
	}
	for _, ref := range refs {
		var v *promptlibrary.Version
		if promptlibrary.IsBareName(ref) {
			vs, err := lib.Versions(ctx, ref)
			if err != nil {
				return nil, err
			}
			if len(vs) == 0 {
				return nil, fmt.Errorf("prompt %q has no version", ref)
			}
			v = &vs[len(vs)-1]
		} else {
			if _, err := promptlibrary.ParsePin(ref); err != nil {
				return nil, err
			}
			var err error
			if v, err = lib.Resolve(ctx, ref); err != nil {
				return nil, err
			}
		}
		lock[v.Name] = v.Pin().String()
	}
	out, err := spliceJSONKey(data, packmanifest.PromptsKey, lock)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := replaceFile(path, out); err != nil {
		return nil, err
	}
	return lock, nil
}

// spliceJSONKey returns doc (a JSON object) with the top-level key set to
// value: the old value's bytes are replaced in place, or the key is added
// at the end. Every other byte of doc is kept.
func spliceJSONKey(doc []byte, key string, value any) ([]byte, error) {
	enc, err := json.MarshalIndent(value, "  ", "  ")
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("pack.json is not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		if t != key {
			continue
		}
		start := end - len(raw)
		if start < afterKey {
			return nil, errors.New("cannot locate the lock map's value")
		}
		return slices.Concat(doc[:start], enc, doc[end:]), nil
	}
	closing := bytes.LastIndexByte(doc, '}')
	body := bytes.TrimRight(doc[:closing], " \t\r\n")
	sep := ","
	if bytes.HasSuffix(body, []byte("{")) {
		sep = ""
	}
	keyJSON, _ := json.Marshal(key)
	return slices.Concat(body, []byte(sep+"\n  "), keyJSON, []byte(": "), enc, []byte("\n"), doc[closing:]), nil
}

// replaceFile writes data over path through a temporary file and a
// rename, keeping the file's mode.
func replaceFile(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, fi.Mode().Perm())
}

// replayFlags are the run command's --replay flag and its reading.
type replayFlags struct {
	record string
	live   []string
}

func (f *replayFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.record, "replay", "", "replay the node of a run record, a file (state_dir/runs/<runId>.json) or a run id (run_…) looked up in\n"+
		"the host's storage (with the postgres backend, a record any host on the database wrote): its input again,\n"+
		"each prompt at the recorded version and digest, and every call with effects answered from the record's\n"+
		"invocation log, never performed")
	cmd.Flags().StringSliceVar(&f.live, "live", nil, "with --replay: run these calls for real although they have effects, a branch rather than a replay;\n"+
		"FAMILY or FAMILY.METHOD (aiEnvelope, mcp.callTool, acme.kv.put), repeated or comma-separated")
}

// byRunID reports whether --replay names a run id rather than a file: a
// run id is looked up in the storage of the started host.
func (f *replayFlags) byRunID() bool { return f.record != "" && host.IsRunID(f.record) }

// resolve returns the typeId, input and options of the run: from the
// record with --replay, read by read, else from the arguments.
func (f *replayFlags) resolve(args []string, c *callFlags, stdin io.Reader, read func(string) (*host.RunRecord, error)) (string, json.RawMessage, host.RunOptions, error) {
	opts := c.options()
	opts.Record = true
	if f.record == "" {
		if len(f.live) > 0 {
			return "", nil, opts, errors.New("--live needs --replay: only a replay chooses calls to run for real")
		}
		if len(args) != 1 {
			return "", nil, opts, errors.New("run needs a TYPEID, or --replay RECORD")
		}
		input, err := c.read(stdin)
		return args[0], input, opts, err
	}
	if c.input != "" {
		return "", nil, opts, errors.New("--input cannot be used with --replay: a replay runs the recorded input")
	}
	if read == nil {
		return "", nil, opts, nil // a run id, read once the host has started
	}
	rec, err := read(f.record)
	if wop.CodeOf(err) == host.CodeRunExpired {
		return "", nil, opts, err // a refusal, printed as one
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, opts, fmt.Errorf("run record %s does not exist; records older than the host's retention (run_records, max_run_records) are deleted", f.record)
	}
	if err != nil {
		return "", nil, opts, err
	}
	if len(args) == 1 && args[0] != rec.TypeID {
		return "", nil, opts, fmt.Errorf("run record %s is of node %s, not %s", f.record, rec.TypeID, args[0])
	}
	opts.Replay = rec
	opts.Live = f.live
	return rec.TypeID, rec.Input, opts, nil
}

// printRunRecord names the run record on stderr, so stdout stays the
// node's output: "run record: PATH", or a JSON object with --json. An
// outcome repeated from an idempotency key says so and names the record
// of the run that produced it; a record that could not be written says
// why.
func (g *globals) printRunRecord(res *host.RunResult) {
	if res == nil || (res.RecordPath == "" && res.RecordError == "" && !res.Replayed) {
		return
	}
	if g.json {
		line := map[string]any{"runId": res.RunID}
		if res.RecordPath != "" {
			line["runRecord"] = res.RecordPath
		}
		if res.RecordError != "" {
			line["runRecordError"] = res.RecordError
		}
		if res.Replayed {
			line["idempotentReplay"] = true
		}
		if res.Replay != nil {
			line["replay"] = res.Replay
		}
		_ = writeJSON(g.stderr, line, false)
		return
	}
	switch {
	case res.Replayed:
		fmt.Fprintf(g.stderr, "idempotent replay: the recorded outcome of run %s; the node did not run again\n", res.RunID)
		if res.RecordPath != "" {
			fmt.Fprintf(g.stderr, "run record: %s\n", res.RecordPath)
		}
	case res.RecordError != "":
		fmt.Fprintf(g.stderr, "run record: not written (%s); the run's outcome stands\n", res.RecordError)
	default:
		fmt.Fprintf(g.stderr, "run record: %s\n", res.RecordPath)
	}
	if res.Replay != nil {
		fmt.Fprintln(g.stderr, describeReplay(res.Replay))
	}
}

// describeReplay is one line on what a replay did with the node's calls,
// and its first divergence.
func describeReplay(s *dispatch.ReplaySummary) string {
	kind := "replay"
	if s.Branch {
		kind = "branch (calls with effects ran live)"
	}
	if s.Node == dispatch.NodeFromRecord {
		return fmt.Sprintf("replay of %s: a side-effect node, answered from its record; none of its code ran", s.Source)
	}
	line := fmt.Sprintf("%s of %s: %d calls served from the log, %d run live, %d diverged", kind, s.Source, s.Served, s.Live, s.Diverged)
	if len(s.Divergences) > 0 {
		d := s.Divergences[0]
		at := "a call the replay did not make"
		if d.Seq > 0 {
			at = fmt.Sprintf("call %d", d.Seq)
		}
		line += fmt.Sprintf("\nfirst divergence: %s, %s.%s (key %s; the source run's: %s): %s", at, d.Family, d.Method, orNone(d.Key), orNone(d.RecordedKey), d.Reason)
	}
	return line
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
