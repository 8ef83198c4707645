package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary, exec'd by the launcher, try one reach
// (reach:target) instead of running the tests.
const childEnv = "WOPHOST_SANDBOX_TEST_REACH"

func TestMain(m *testing.M) {
	if IsLaunch(os.Args) {
		os.Exit(Launch(os.Args))
	}
	if r := os.Getenv(childEnv); r != "" {
		os.Exit(tryReach(r))
	}
	os.Exit(m.Run())
}

// tryReach does one thing and says on stdout whether it worked: "ok" or
// "refused: <error>".
func tryReach(r string) int {
	reach, target, _ := strings.Cut(r, ":")
	var err error
	switch reach {
	case "read":
		var f *os.File
		if f, err = os.Open(target); err == nil {
			_, err = f.Read(make([]byte, 16))
			f.Close()
		}
	case "write":
		err = os.WriteFile(target, []byte("x"), 0o600)
	case "connect":
		var c net.Conn
		if c, err = net.DialTimeout("tcp", target, 2*time.Second); err == nil {
			c.Close()
		}
	case "udp":
		// UDP, which Landlock's network rules (TCP bind and connect) do
		// not cover: only the seccomp filter's socket rule refuses it.
		var c net.Conn
		if c, err = net.Dial("udp", target); err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
	case "exec":
		err = exec.Command(target).Run()
	case "own":
		f := filepath.Join(os.TempDir(), "own")
		if err = os.WriteFile(f, []byte("x"), 0o600); err == nil {
			_, err = os.ReadFile(f)
		}
	case "alloc":
		n, _ := strconv.Atoi(target)
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
	case "ids":
		// Not a reach: what the process runs as, for the run_as test.
		groups, _ := os.Getgroups()
		fmt.Printf("%d:%d:%v", os.Getuid(), os.Getgid(), groups)
		return 0
	case "signal":
		pid, _ := strconv.Atoi(target)
		err = syscall.Kill(pid, 0)
	}
	if err != nil {
		fmt.Printf("refused: %v", err)
		return 0
	}
	fmt.Print("ok")
	return 0
}

// contained runs reach through the launcher under p, declaring declared,
// and returns what the child said.
func contained(t *testing.T, p Policy, declared []string, reach string) (string, *Process) {
	t.Helper()
	support := Probe()
	if support.LandlockABI < 1 || !support.Seccomp {
		// WOPHOST_TEST_SANDBOX=1 (as CI sets it) fails instead.
		if os.Getenv("WOPHOST_TEST_SANDBOX") == "1" {
			t.Fatal("Landlock and seccomp are needed, and WOPHOST_TEST_SANDBOX=1 requires them")
		}
		t.Skip("Landlock and seccomp are needed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	proc, err := support.Prepare("test", p, declared, filepath.Dir(self), filepath.Join(t.TempDir(), "state"), entry, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Close)
	cmd := exec.Command(self)
	cmd.Env = []string{childEnv + "=" + reach, "WOPHOST_TEST_SECRET=yes"}
	if err := proc.Wrap(cmd, self, entry); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("exit: %v: %s", err, out), proc
	}
	return string(out), proc
}

// uncontained runs reach in a plain child.
func uncontained(t *testing.T, reach string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{childEnv + "=" + reach}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("exit: %v: %s", err, out)
	}
	return string(out)
}

func TestContainedProcessIsRefusedWhatItWasNotGranted(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	cases := []struct{ name, reach string }{
		{"read a file outside", "read:" + secret},
		{"read the parent's environment", "read:/proc/" + strconv.Itoa(os.Getpid()) + "/environ"},
		{"write outside", "write:" + filepath.Join(t.TempDir(), "out")},
		{"connect to a local port", "connect:" + ln.Addr().String()},
		{"send a datagram", "udp:" + udp.LocalAddr().String()},
		{"run a program", "exec:/bin/true"},
		{"signal the parent", "signal:" + strconv.Itoa(os.Getpid())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The same reach uncontained works: the refusal is the
			// sandbox's.
			if out := uncontained(t, c.reach); out != "ok" {
				t.Fatalf("%s uncontained: got %q, want ok", c.reach, out)
			}
			out, _ := contained(t, Policy{}, nil, c.reach)
			t.Logf("%s: %s", c.reach, out)
			if !strings.HasPrefix(out, "refused: ") {
				t.Fatalf("%s: got %q, want a refusal", c.reach, out)
			}
		})
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the listener accepted %d connections, want 1 (the uncontained one)", n)
	}
	// A datagram on loopback is queued on the receiving socket before
	// its send returns: what was sent is there to read by now.
	datagrams := 0
	for buf := make([]byte, 16); ; datagrams++ {
		if err := udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := udp.ReadFrom(buf); err != nil {
			break
		}
	}
	if datagrams != 1 {
		t.Fatalf("the UDP socket received %d datagrams, want 1 (the uncontained one)", datagrams)
	}
}

func TestContainedProcessKeepsWhatItOwns(t *testing.T) {
	for _, reach := range []string{"own:", "read:/dev/urandom", "write:/dev/null"} {
		out, _ := contained(t, Policy{}, nil, reach)
		if out != "ok" {
			t.Errorf("%s: got %q, want ok", reach, out)
		}
	}
}

func TestGrantedRequirementsAreAllowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	p := Policy{Allow: []string{NetOutbound, Subprocess}}
	for _, reach := range []string{"connect:" + ln.Addr().String(), "exec:/bin/true"} {
		if out, _ := contained(t, p, []string{NetOutbound, Subprocess}, reach); out != "ok" {
			t.Errorf("%s granted: got %q, want ok", reach, out)
		}
		// Allowed but not declared: still refused.
		if out, _ := contained(t, p, nil, reach); !strings.HasPrefix(out, "refused: ") {
			t.Errorf("%s allowed, not declared: got %q, want a refusal", reach, out)
		}
	}
}

func TestMemoryCapKillsTheProcess(t *testing.T) {
	out, proc := contained(t, Policy{MemoryBytes: 64 << 20}, nil, "alloc:"+strconv.Itoa(512<<20))
	if out == "ok" {
		t.Fatalf("allocating 512 MiB under a 64 MiB cap succeeded")
	}
	capped := proc.cgroup.MemoryCapped()
	if capped && !proc.MemoryExceeded() {
		t.Fatalf("the process ended (%s) but its cgroup counted no OOM kill", out)
	}
	// The host asks once the process is gone, which may be after Close:
	// the answers hold.
	proc.Close()
	if got := proc.MemoryLimit(); got != 64<<20 {
		t.Errorf("MemoryLimit after Close = %d, want %d", got, 64<<20)
	}
	if capped && !proc.MemoryExceeded() {
		t.Errorf("MemoryExceeded after Close = false, want the OOM kill still counted")
	}
}

// As root with run_as, the process runs as that user and its group, with
// no other group, and still has its own temporary directory, although
// the directories the sandbox's rules name (the test binary's, the state
// directory under the test's own 0700 temporary directory) are closed to
// that user.
func TestRunAsSwitchesUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("switching user takes root; the test runs as uid %d", os.Geteuid())
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("the test runs as the user nobody, which this system does not have: %v", err)
	}
	p := Policy{RunAs: "nobody"}
	if out, _ := contained(t, p, nil, "ids:"); out != nobody.Uid+":"+nobody.Gid+":[]" {
		t.Errorf("ids under run_as nobody: got %q, want %s:%s:[]", out, nobody.Uid, nobody.Gid)
	}
	if out, _ := contained(t, p, nil, "own:"); out != "ok" {
		t.Errorf("own under run_as nobody: got %q, want ok", out)
	}
}
