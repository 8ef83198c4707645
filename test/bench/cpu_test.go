package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time (user plus system) the process pid has used
// so far, from /proc/<pid>/stat, to a clock tick. pid 0 is this process,
// read through getrusage to the microsecond.
func procCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, fmt.Errorf("getrusage: %w", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
	}
	// The command name in parentheses may hold spaces: the fields that
	// follow are counted from its closing parenthesis. utime and stime are
	// fields 14 and 15 of the line, the 12th and 13th after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cpu time of process %d: malformed stat %q", pid, b)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("cpu time of process %d: short stat %q", pid, b)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// cpuMeter measures the CPU time a set of processes spends on a path.
type cpuMeter struct {
	// names are the metric prefixes ("pack", "host", "plugin"); pids the
	// processes they stand for, 0 for this one.
	names []string
	pids  []int
	// used is what each process spent during the last measured run.
	used []time.Duration
}

// newCPUMeter measures the processes pids under names (paired in order).
func newCPUMeter(names []string, pids ...int) *cpuMeter {
	return &cpuMeter{names: names, pids: pids, used: make([]time.Duration, len(pids))}
}

// wrap returns calls measured: each run of it records what every process
// spent, replacing the previous run's figures, so that after timeCalls
// (warm-up first, then the timed run) the meter holds the timed run's.
func (m *cpuMeter) wrap(tb testing.TB, calls func(n int) error) func(n int) error {
	return m.measure(tb, calls, false)
}

// wrapAdding is wrap adding each run's figures to those before, for a
// path timed in rounds (timeRounds) with its warm-up outside the meter.
func (m *cpuMeter) wrapAdding(tb testing.TB, calls func(n int) error) func(n int) error {
	return m.measure(tb, calls, true)
}

func (m *cpuMeter) measure(tb testing.TB, calls func(n int) error, adding bool) func(n int) error {
	return func(n int) error {
		before := m.sample(tb)
		err := calls(n)
		after := m.sample(tb)
		for i := range m.used {
			if !adding {
				m.used[i] = 0
			}
			m.used[i] += after[i] - before[i]
		}
		return err
	}
}

func (m *cpuMeter) sample(tb testing.TB) []time.Duration {
	out := make([]time.Duration, len(m.pids))
	for i, pid := range m.pids {
		out[i] = cpuOf(tb, pid)
	}
	return out
}

// cpuOf is procCPU(pid), failing tb when it cannot be read.
func cpuOf(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	d, err := procCPU(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// treeCPU returns the CPU time the process pid and every process below it
// have used so far: a plugin may start processes of its own, such as the
// MCP servers of the mcp plugin. Each process's time is the sum of its
// threads' run times in /proc/<pid>/task/<tid>/schedstat, to the
// nanosecond: procCPU's clock ticks would round each of a few processes
// that use a few milliseconds down by up to a tick. A thread that ended
// no longer counts, so the figure may read low by its time; a process
// that ends while the tree is read is skipped.
func treeCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0, fmt.Errorf("threads of process %d: %w", pid, err)
	}
	var total time.Duration
	for _, task := range tasks {
		dir := "/proc/" + strconv.Itoa(pid) + "/task/" + task.Name()
		ran, err := threadRunTime(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
		}
		total += ran
		b, err := os.ReadFile(dir + "/children")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("children of process %d: %w", pid, err)
		}
		for _, f := range bytes.Fields(b) {
			child, err := strconv.Atoi(string(f))
			if err != nil {
				return 0, fmt.Errorf("children of process %d: %w", pid, err)
			}
			d, err := treeCPU(child)
			if errors.Is(err, fs.ErrNotExist) {
				continue // the child ended
			}
			if err != nil {
				return 0, err
			}
			total += d
		}
	}
	return total, nil
}

// threadRunTime reads the time the thread whose /proc directory is dir
// has run on a CPU: the first field of its schedstat, in nanoseconds.
func threadRunTime(dir string) (time.Duration, error) {
	b, err := os.ReadFile(dir + "/schedstat")
	if err != nil {
		return 0, err
	}
	fields := bytes.Fields(b)
	if len(fields) == 0 {
		return 0, fmt.Errorf("empty %s/schedstat", dir)
	}
	ns, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	return time.Duration(ns), nil
}

// treeCPUOf is treeCPU(pid), failing tb when it cannot be read.
func treeCPUOf(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	d, err := treeCPU(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// report adds "<prefix><name>-cpu-µs/call" for every process, over n calls.
func (m *cpuMeter) report(b *testing.B, prefix string, n int) {
	for i, name := range m.names {
		b.ReportMetric(float64(m.used[i].Microseconds())/float64(n), prefix+name+"-cpu-µs/call")
	}
}

// processID returns the pid of the process h runs for the capability or
// pack name.
func processID(tb testing.TB, h *host.Host, name string) int {
	tb.Helper()
	pid, ok := h.ProcessIDs()[name]
	if !ok {
		tb.Fatalf("the host runs no process for %s: %v", name, h.ProcessIDs())
	}
	return pid
}

func TestProcCPU(t *testing.T) {
	self, err := procCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	viaProc, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Both count this process from its start; /proc rounds down to a tick
	// and was read after getrusage.
	if viaProc < self-2*clockTick || viaProc > self+time.Second {
		t.Fatalf("/proc/self/stat says %v, getrusage %v", viaProc, self)
	}
}

func TestTreeCPU(t *testing.T) {
	// A child that burns CPU until killed: the tree counts its time, the
	// process alone does not.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		child, err := procCPU(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if child >= 5*clockTick {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child used only %v in 10s", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tree, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// procCPU rounds down to a tick and was read after treeCPU.
	if tree < self-clockTick+5*clockTick {
		t.Fatalf("tree %v does not count the child: the process alone used %v", tree, self)
	}
}
