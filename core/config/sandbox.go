package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wophost/wophost/core/packmanifest"
)

// Defaults and bounds of the sandbox block.
const (
	// DefaultSandboxMemoryBytes is the memory a contained process may
	// use (512 MiB): its cgroup's memory.max.
	DefaultSandboxMemoryBytes = 512 << 20
	// MinSandboxMemoryBytes (16 MiB) keeps room for a runtime to start.
	MinSandboxMemoryBytes = 16 << 20
	// MaxSandboxMemoryBytes bounds memory (1 TiB).
	MaxSandboxMemoryBytes = 1 << 40
	// DefaultSandboxProcesses is the tasks, threads included, a contained
	// process may have at once: its cgroup's pids.max.
	DefaultSandboxProcesses = 64
	// MinSandboxProcesses leaves a runtime the threads it starts of its
	// own before the program's first line runs.
	MinSandboxProcesses = 8
	// MaxSandboxProcesses bounds processes.
	MaxSandboxProcesses = 65536
)

// Sandbox is the containment policy of one pack or plugin: what its
// process may use and reach. The host applies it when it starts the
// process; where a rule cannot be enforced (another OS, an older kernel),
// RequireSandbox decides whether the process starts without it.
type Sandbox struct {
	// Enabled contains the process; false starts it as an ordinary
	// process of the host's user.
	Enabled bool
	// Allow lists the runtime requirements granted
	// (packmanifest.RuntimeRequirements), sorted; nil grants none.
	Allow []string
	// MemoryBytes is the most memory the process may use.
	MemoryBytes int64
	// Processes is the most tasks, threads included, it may have at once.
	Processes int
	// ReadPaths are absolute, cleaned paths it may read besides its own
	// directory, sorted; nil when none.
	ReadPaths []string
	// WritePaths are absolute, cleaned paths it may write besides its
	// state directory and its temporary one, sorted; nil when none.
	WritePaths []string
	// RunAs is the user, "user:group" or "uid:gid" the process runs as;
	// "" keeps the host's. Only checked for its form here: the names are
	// resolved when the process starts.
	RunAs string

	// DefRange is the sandbox block's range. A pack without a block of
	// its own has the host's: its sandbox block's, else the host block's,
	// else none (no host block).
	DefRange hcl.Range
}

// DefaultSandbox is the sandbox of a host block without a sandbox block,
// and of a capability's sandbox block before its attributes.
func DefaultSandbox() Sandbox {
	return Sandbox{Enabled: true, MemoryBytes: DefaultSandboxMemoryBytes, Processes: DefaultSandboxProcesses}
}

// clone returns s with lists of its own.
func (s Sandbox) clone() Sandbox {
	s.Allow = slices.Clone(s.Allow)
	s.ReadPaths = slices.Clone(s.ReadPaths)
	s.WritePaths = slices.Clone(s.WritePaths)
	return s
}

type rawSandbox struct {
	Enabled    *hcl.Attribute `hcl:"enabled"`
	Allow      *hcl.Attribute `hcl:"allow"`
	Memory     *hcl.Attribute `hcl:"memory"`
	Processes  *hcl.Attribute `hcl:"processes"`
	ReadPaths  *hcl.Attribute `hcl:"read_paths"`
	WritePaths *hcl.Attribute `hcl:"write_paths"`
	RunAs      *hcl.Attribute `hcl:"run_as"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

// sandbox validates a host, pack or capability block's sandbox blocks:
// each attribute set replaces base's value, the others keep it. It
// reports false, and returns base, when the parent has no sandbox block.
func (d *decoder) sandbox(blocks []*rawSandbox, base Sandbox) (Sandbox, bool) {
	// Each pack gets lists of its own, not the host's.
	base = base.clone()
	if len(blocks) == 0 {
		return base, false
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate sandbox block",
			"A sandbox block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	s := base
	s.DefRange = raw.DefRange
	d.attr(raw.Enabled, &s.Enabled)
	if allow, ok := d.allowAttr(raw.Allow); ok {
		s.Allow = allow
	}
	if n, ok := d.memoryAttr(raw.Memory, MinSandboxMemoryBytes, MaxSandboxMemoryBytes); ok {
		s.MemoryBytes = n
	}
	if n, ok := d.intAttr(raw.Processes, MinSandboxProcesses, MaxSandboxProcesses); ok {
		s.Processes = n
	}
	if paths, ok := d.pathsAttr(raw.ReadPaths); ok {
		s.ReadPaths = paths
	}
	if paths, ok := d.pathsAttr(raw.WritePaths); ok {
		s.WritePaths = paths
	}
	var runAs string
	if d.attr(raw.RunAs, &runAs) {
		if msg := checkRunAs(runAs); msg != "" {
			d.errorf(raw.RunAs.Expr.Range(), "Invalid run_as", "run_as %s; got %q.", msg, runAs)
		} else {
			s.RunAs = runAs
		}
	}
	return s, true
}

// allowAttr reads allow: runtime requirement tokens, each at most once,
// returned sorted.
func (d *decoder) allowAttr(a *hcl.Attribute) ([]string, bool) {
	var tokens []string
	if !d.attr(a, &tokens) {
		return nil, false
	}
	rngs := elementRanges(a, len(tokens))
	ok := true
	seen := make(map[string]bool, len(tokens))
	for i, tok := range tokens {
		switch {
		case !packmanifest.IsRuntimeRequirement(tok):
			d.errorf(rngs[i], "Invalid allow",
				"allow: %q is not a runtime requirement; the requirements are %s.",
				tok, strings.Join(packmanifest.RuntimeRequirements(), ", "))
			ok = false
		case seen[tok]:
			d.errorf(rngs[i], "Invalid allow", "allow: %q is listed more than once.", tok)
			ok = false
		}
		seen[tok] = true
	}
	if !ok {
		return nil, false
	}
	if len(tokens) == 0 {
		return nil, true
	}
	slices.Sort(tokens)
	return tokens, true
}

// pathsAttr reads read_paths or write_paths: absolute paths, returned
// cleaned, sorted and without repeats. write_paths may not hold "/".
func (d *decoder) pathsAttr(a *hcl.Attribute) ([]string, bool) {
	var paths []string
	if !d.attr(a, &paths) {
		return nil, false
	}
	rngs := elementRanges(a, len(paths))
	ok := true
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		switch {
		case !filepath.IsAbs(p):
			d.errorf(rngs[i], "Invalid "+a.Name,
				"%s must hold absolute paths; got %q.", a.Name, p)
			ok = false
		case a.Name == "write_paths" && filepath.Clean(p) == "/":
			d.errorf(rngs[i], "Invalid write_paths",
				"write_paths must not hold %q: the process could write everywhere the user it runs as may, the host's own files included.", p)
			ok = false
		default:
			out = append(out, filepath.Clean(p))
		}
	}
	if !ok {
		return nil, false
	}
	if len(out) == 0 {
		return nil, true
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// elementRanges returns the range of each of the n elements of a list
// attribute, or the whole expression's when it is not written as a list
// of n elements (a function's result, say).
func elementRanges(a *hcl.Attribute, n int) []hcl.Range {
	out := make([]hcl.Range, n)
	exprs, diags := hcl.ExprList(a.Expr)
	for i := range out {
		if !diags.HasErrors() && len(exprs) == n {
			out[i] = exprs[i].Range()
		} else {
			out[i] = a.Expr.Range()
		}
	}
	return out
}

// memoryForms is how memory may be written, for the diagnostics. Only
// binary units are accepted: "512MB" read as 512 MiB or as 512 000 000
// bytes would differ by 5 %, and the operator would not know which.
const memoryForms = `a whole number of bytes, or a string "N", "NKiB", "NMiB", "NGiB" or "NTiB" (binary units: 1 MiB is 1048576 bytes)`

// memoryAttr reads a size in bytes (memory, max_memory): a number of
// bytes, or a string of one with an optional binary unit, within [lo, hi].
func (d *decoder) memoryAttr(a *hcl.Attribute, lo, hi int64) (int64, bool) {
	v, ok := d.value(a)
	if !ok {
		return 0, false
	}
	rng := a.Expr.Range()
	var n int64
	var shown string
	switch v.Type() {
	case cty.Number:
		bf := v.AsBigFloat()
		shown = bf.Text('f', -1)
		if !bf.IsInt() {
			d.errorf(rng, "Invalid "+a.Name, "%s must be %s; got %s.", a.Name, memoryForms, shown)
			return 0, false
		}
		// Past int64 either way, Int64 saturates, and the bounds refuse.
		n, _ = bf.Int64()
	case cty.String:
		shown = strconv.Quote(v.AsString())
		if n, ok = parseMemory(v.AsString()); !ok {
			d.errorf(rng, "Invalid "+a.Name, "%s must be %s; got %s.", a.Name, memoryForms, shown)
			return 0, false
		}
		shown = fmt.Sprintf("%s (%d bytes)", shown, n)
	default:
		d.errorf(rng, "Invalid "+a.Name, "%s must be %s; got a value of type %s.", a.Name, memoryForms, v.Type().FriendlyName())
		return 0, false
	}
	if n < lo || n > hi {
		d.errorf(rng, "Invalid "+a.Name, "%s must be between %s (%d bytes) and %s (%d bytes); got %s.",
			a.Name, formatMemory(lo), lo, formatMemory(hi), hi, shown)
		return 0, false
	}
	return n, true
}

// formatMemory writes n bytes in the largest binary unit that divides it.
func formatMemory(n int64) string {
	for i, unit := range []string{"TiB", "GiB", "MiB", "KiB"} {
		if size := int64(1) << (10 * (4 - i)); n >= size && n%size == 0 {
			return strconv.FormatInt(n/size, 10) + unit
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseMemory reads "N", "NKiB", "NMiB", "NGiB" or "NTiB". A number too
// large for int64 comes back as math.MaxInt64, which the bounds refuse.
func parseMemory(s string) (int64, bool) {
	digits, unit := s, int64(1)
	for i, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if rest, ok := strings.CutSuffix(s, suffix); ok {
			digits, unit = rest, int64(1)<<(10*(i+1))
			break
		}
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		// The digits are digits: only overflow is left.
		return math.MaxInt64, true
	}
	return n * unit, true
}

// maxID is the largest user or group id: 2³²−1 is the kernel's "no
// change" (-1), never an id.
const maxID = math.MaxUint32 - 1

// checkRunAs checks run_as's form: "" (no switch), "user" or "user:group",
// either part a name or a numeric id. It returns what is wrong, "" when
// nothing is. The names are not looked up: the accounts of the machine
// the host starts on are the ones that count.
func checkRunAs(s string) string {
	if s == "" {
		return ""
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return `must not hold spaces or control characters`
	}
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return `must be "user", "user:group" or "uid:gid", with at most one colon`
	}
	for _, p := range parts {
		if p == "" {
			return `must be "user", "user:group" or "uid:gid", with neither part empty`
		}
		if strings.TrimLeft(p, "0123456789") == "" {
			if id, err := strconv.ParseUint(p, 10, 64); err != nil || id > maxID {
				return fmt.Sprintf("holds the id %s, above the largest, %d", p, uint64(maxID))
			}
		}
	}
	return ""
}
