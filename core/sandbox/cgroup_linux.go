package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupRoot is where the kernel's cgroup file systems are mounted on
// every distribution that mounts them.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupParents are the directories under which the host makes the
// cgroups of its contained processes: one per controller on cgroup v1,
// one for both on v2. A field is "" when that controller cannot be used.
type cgroupParents struct {
	version int
	memory  string
	pids    string
}

// findCgroups locates the host's own cgroups and checks that it may make
// children in them. It changes nothing but, on cgroup v2, moving the host
// into a leaf of its own cgroup so that controllers can be enabled for
// the cgroup's children (the kernel allows processes only in leaves).
func findCgroups(hostPID int) cgroupParents {
	own, err := ownCgroups()
	if err != nil {
		return cgroupParents{}
	}
	if p, ok := own[""]; ok {
		if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
			return cgroupV2(filepath.Join(cgroupRoot, p), hostPID)
		}
	}
	out := cgroupParents{version: 1}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"memory", &out.memory}, {"pids", &out.pids}} {
		p, ok := own[c.name]
		if !ok {
			continue
		}
		dir := filepath.Join(cgroupRoot, c.name, p)
		if writableDir(dir) {
			*c.dst = dir
		}
	}
	if out.memory == "" && out.pids == "" {
		return cgroupParents{}
	}
	return out
}

// cgroupV2 prepares dir, the host's cgroup on the unified hierarchy, to
// hold its contained processes' cgroups with memory and pids enabled.
func cgroupV2(dir string, hostPID int) cgroupParents {
	if !writableDir(dir) {
		return cgroupParents{}
	}
	enabled := func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		return strings.Fields(string(b))
	}
	if on := enabled(); !slices.Contains(on, "memory") || !slices.Contains(on, "pids") {
		avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil || !slices.Contains(strings.Fields(string(avail)), "memory") || !slices.Contains(strings.Fields(string(avail)), "pids") {
			return cgroupParents{}
		}
		// A cgroup with processes of its own cannot give controllers to
		// its children: the host moves itself into a leaf first.
		leaf := filepath.Join(dir, "wophost-host")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return cgroupParents{}
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(hostPID)), 0); err != nil {
			return cgroupParents{}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return cgroupParents{}
		}
	}
	return cgroupParents{version: 2, memory: dir, pids: dir}
}

// ownCgroups reads /proc/self/cgroup: controller -> path, "" for the
// unified hierarchy.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func writableDir(dir string) bool {
	probe, err := os.MkdirTemp(dir, "wophost-probe-")
	if err != nil {
		return false
	}
	return os.Remove(probe) == nil
}

// Cgroup is the cgroup (one per controller on v1) of one contained
// process. Remove it once the process has exited.
type Cgroup struct {
	version int
	memory  string
	pids    string
	// Limit is the memory cap in bytes, 0 when memory is not capped by
	// this cgroup.
	Limit int64
}

// newCgroup makes name's cgroups under parents with the caps set.
func newCgroup(parents cgroupParents, name string, memory int64, processes int) (*Cgroup, error) {
	c := &Cgroup{version: parents.version}
	mk := func(parent string) (string, error) {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
		return os.MkdirTemp(parent, name+"-")
	}
	write := func(dir, file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", file, err)
		}
		return nil
	}
	fail := func(err error) (*Cgroup, error) {
		c.Remove()
		return nil, err
	}
	if parents.memory != "" && memory > 0 {
		dir, err := mk(parents.memory)
		if err != nil {
			return fail(fmt.Errorf("make memory cgroup: %w", err))
		}
		c.memory = dir
		v := strconv.FormatInt(memory, 10)
		if parents.version == 2 {
			// Swap would let a process past its cap at the machine's cost.
			for _, kv := range [][2]string{{"memory.max", v}, {"memory.swap.max", "0"}, {"memory.oom.group", "1"}} {
				if err := write(dir, kv[0], kv[1]); err != nil && kv[0] == "memory.max" {
					return fail(err)
				}
			}
		} else {
			if err := write(dir, "memory.limit_in_bytes", v); err != nil {
				return fail(err)
			}
			// Present only with swap accounting; where it is, swap counts
			// against the same cap.
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				if err := write(dir, "memory.memsw.limit_in_bytes", v); err != nil {
					return fail(err)
				}
			}
		}
		c.Limit = memory
	}
	if parents.pids != "" && processes > 0 {
		dir := c.memory
		if parents.version == 1 || dir == "" {
			d, err := mk(parents.pids)
			if err != nil {
				return fail(fmt.Errorf("make pids cgroup: %w", err))
			}
			dir = d
		}
		c.pids = dir
		if err := write(dir, "pids.max", strconv.Itoa(processes)); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// procsFiles are the files the launcher writes its pid into.
func (c *Cgroup) procsFiles() []string {
	var out []string
	for _, d := range c.dirs() {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

func (c *Cgroup) dirs() []string {
	var out []string
	if c.memory != "" {
		out = append(out, c.memory)
	}
	if c.pids != "" && c.pids != c.memory {
		out = append(out, c.pids)
	}
	return out
}

// MemoryCapped reports whether the memory cap is enforced by the cgroup.
func (c *Cgroup) MemoryCapped() bool { return c != nil && c.memory != "" }

// ProcessesCapped reports whether the process cap is enforced.
func (c *Cgroup) ProcessesCapped() bool { return c != nil && c.pids != "" }

// OOMKills is how many times the kernel killed a process of the cgroup
// for reaching its memory cap.
func (c *Cgroup) OOMKills() int {
	if c == nil || c.memory == "" {
		return 0
	}
	file := "memory.oom_control"
	if c.version == 2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.memory, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// Remove removes the cgroup; its processes must have exited. It is safe
// to call on nil and more than once.
func (c *Cgroup) Remove() {
	if c == nil {
		return
	}
	for _, d := range c.dirs() {
		_ = os.Remove(d)
	}
	c.memory, c.pids = "", ""
}
