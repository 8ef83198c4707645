package release_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// installEnv turns on the test that installs the .deb on this machine.
const installEnv = "WOPHOST_TEST_INSTALL"

// The paths the package installs or makes, none of which may be there
// before the test, so that it removes only what it made.
var installedPaths = []string{"/usr/lib/wophost", "/usr/bin/wophost", "/etc/wophost", "/var/lib/wophost", "/usr/lib/systemd/system/wophost.service", "/usr/share/doc/wophost"}

// The .deb installs on this machine as an operator installs it: the
// files with their modes and owners, the user wophost and its state
// directory; a second install changes nothing; the host prints the
// release's version, accepts the packaged config and serves on it as the
// user wophost until /readyz answers 200; systemd accepts the unit. Removal
// takes the programs and leaves the config, purge takes the config and,
// while the host's state is there, keeps it and the user that owns it;
// with the state gone, purge removes the state directory and the user.
// The machine is left as found, also when the test fails.
func TestInstallDeb(t *testing.T) {
	if os.Getenv(installEnv) != "1" {
		t.Skipf("set %s=1 to install the .deb on this machine (it needs root and dpkg, adds the user wophost and files under /usr, /etc and /var/lib, and removes them after)", installEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatal("installing the .deb needs root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatal("installing the .deb needs dpkg")
	}
	checkNotInstalled(t)
	t.Cleanup(func() { restoreMachine(t) })
	deb := packageFile(t, "wophost_*_"+runtime.GOARCH+".deb")

	out := run(t, "dpkg", "-i", deb)
	checkInstalled(t)
	u := lookupUser(t)
	run(t, "dpkg", "-i", deb)
	if again := lookupUser(t); again.Uid != u.Uid || again.Gid != u.Gid {
		t.Errorf("a second install changed the user: %+v, then %+v", u, again)
	}
	checkInstalled(t)
	if strings.Contains(out, "kept") {
		t.Errorf("dpkg -i said something was kept:\n%s", out)
	}

	out = run(t, "/usr/bin/wophost", "--version")
	if !strings.Contains(out, " "+theRelease(t).version+"\n") {
		t.Errorf("wophost --version: %q, want the version %s", out, theRelease(t).version)
	}
	out = run(t, "runuser", "-u", "wophost", "--", "/usr/bin/wophost", "--config", "/etc/wophost/host.hcl", "validate")
	if !strings.Contains(out, "no problems; 4 of 4 capabilities ready") {
		t.Errorf("validate of the packaged config as wophost:\n%s", out)
	}
	serveAsWophost(t)
	verifyUnit(t)

	run(t, "dpkg", "-r", "wophost")
	for _, p := range []string{"/usr/lib/wophost", "/usr/bin/wophost", "/usr/lib/systemd/system/wophost.service"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after dpkg -r, %s: %v, want it gone", p, err)
		}
	}
	if _, err := os.Stat("/etc/wophost/host.hcl"); err != nil {
		t.Errorf("after dpkg -r the config is gone (%v); it stays until purge", err)
	}
	out = run(t, "dpkg", "--purge", "wophost")
	if _, err := os.Stat("/etc/wophost"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after purge, /etc/wophost: %v, want it gone", err)
	}
	if _, err := os.Stat("/var/lib/wophost/plugins"); err != nil {
		t.Errorf("purge removed the host's state (%v); it is the operator's to remove", err)
	}
	if !strings.Contains(out, "kept /var/lib/wophost") {
		t.Errorf("purge did not say it kept the state:\n%s", out)
	}
	lookupUser(t)

	// The operator removes the state; then a purge leaves nothing.
	entries, err := os.ReadDir("/var/lib/wophost")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join("/var/lib/wophost", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "dpkg", "-i", deb)
	if again := lookupUser(t); again.Uid != u.Uid {
		t.Errorf("an install over the kept user made another: uid %s, was %s", again.Uid, u.Uid)
	}
	run(t, "dpkg", "--purge", "wophost")
	for _, p := range installedPaths {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after purge with no state, %s: %v, want it gone", p, err)
		}
	}
	if _, err := user.Lookup("wophost"); err == nil {
		t.Error("after purge with no state the user wophost is still there")
	}
	if _, err := user.LookupGroup("wophost"); err == nil {
		t.Error("after purge with no state the group wophost is still there")
	}
}

// checkNotInstalled fails the test unless nothing of the package is on
// the machine: the test removes all of it after, and must not remove what
// it did not install.
func checkNotInstalled(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "wophost").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Fatalf("the package wophost is installed already (%s): remove it before the test", out)
	}
	for _, p := range installedPaths {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s is there already: the test would remove what it did not make", p)
		}
	}
	if _, err := user.Lookup("wophost"); err == nil {
		t.Fatal("the user wophost is there already: the test would remove what it did not make")
	}
	if _, err := user.LookupGroup("wophost"); err == nil {
		t.Fatal("the group wophost is there already: the test would remove what it did not make")
	}
}

// restoreMachine removes whatever of the package is left: the package,
// its files, the state directory, the user and the group, none of which
// was there before the test.
func restoreMachine(t *testing.T) {
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "wophost").Output(); err == nil && !strings.Contains(string(out), "not-installed") {
		if out, err := exec.Command("dpkg", "--purge", "wophost").CombinedOutput(); err != nil {
			t.Errorf("cleanup: dpkg --purge: %v\n%s", err, out)
		}
	}
	for _, p := range installedPaths {
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if _, err := user.Lookup("wophost"); err == nil {
		if out, err := exec.Command("userdel", "wophost").CombinedOutput(); err != nil {
			t.Errorf("cleanup: userdel: %v\n%s", err, out)
		}
	}
	if _, err := user.LookupGroup("wophost"); err == nil {
		if out, err := exec.Command("groupdel", "wophost").CombinedOutput(); err != nil {
			t.Errorf("cleanup: groupdel: %v\n%s", err, out)
		}
	}
}

// run runs a command, failing the test when it fails, and returns its
// output, stdout and stderr together.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lookupUser returns the user wophost, which must be a system user whose
// home is the state directory and who cannot log in.
func lookupUser(t *testing.T) *user.User {
	t.Helper()
	u, err := user.Lookup("wophost")
	if err != nil {
		t.Fatalf("the user wophost: %v", err)
	}
	g, err := user.LookupGroup("wophost")
	if err != nil || g.Gid != u.Gid {
		t.Fatalf("the group wophost: %+v, %v; want the user's primary group %s", g, err, u.Gid)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("the user wophost has uid %d, want a system user's", uid)
	}
	if u.HomeDir != "/var/lib/wophost" {
		t.Errorf("the user wophost's home is %s, want /var/lib/wophost", u.HomeDir)
	}
	passwd, err := exec.Command("getent", "passwd", "wophost").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(passwd)), "nologin") {
		t.Errorf("the user wophost may log in: %s %v", passwd, err)
	}
	return u
}

// checkInstalled checks what an install put on the machine: the programs
// root's and executable, the link, the config, the unit, the state
// directory the user's alone, and no /usr/bin/host of the package's.
func checkInstalled(t *testing.T) {
	t.Helper()
	type want struct {
		mode  fs.FileMode
		owner string
	}
	wants := map[string]want{
		"/usr/lib/wophost":                        {fs.ModeDir | 0o755, "root"},
		"/etc/wophost":                            {fs.ModeDir | 0o755, "root"},
		"/etc/wophost/host.hcl":                   {0o644, "root"},
		"/usr/lib/systemd/system/wophost.service": {0o644, "root"},
		"/var/lib/wophost":                        {fs.ModeDir | 0o750, "wophost"},
	}
	for _, p := range programs(t, "linux") {
		wants["/usr/lib/wophost/"+p] = want{0o755, "root"}
	}
	for path, w := range wants {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if fi.Mode() != w.mode {
			t.Errorf("%s: mode %s, want %s", path, fi.Mode(), w.mode)
		}
		st := fi.Sys().(*syscall.Stat_t)
		u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
		g, gerr := user.LookupGroupId(strconv.Itoa(int(st.Gid)))
		if err != nil || gerr != nil || u.Username != w.owner || g.Name != w.owner {
			t.Errorf("%s: owned by %d:%d, want %s:%s", path, st.Uid, st.Gid, w.owner, w.owner)
		}
	}
	if target, err := os.Readlink("/usr/bin/wophost"); err != nil || target != "/usr/lib/wophost/host" {
		t.Errorf("/usr/bin/wophost: %q, %v; want a link to /usr/lib/wophost/host", target, err)
	}
	if out, err := exec.Command("dpkg", "-S", "/usr/bin/host").CombinedOutput(); err == nil && strings.Contains(string(out), "wophost") {
		t.Errorf("the package ships /usr/bin/host, which Debian's bind9-host owns: %s", out)
	}
}

// serveAsWophost runs `host serve` on the packaged config as the user
// wophost, as the unit does, until /readyz answers 200, then stops it with
// SIGTERM, as systemctl stop does, and checks it wrote its state as
// wophost.
func serveAsWophost(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("setpriv", "--reuid=wophost", "--regid=wophost", "--init-groups", "--",
		"/usr/bin/wophost", "--config", "/etc/wophost/host.hcl", "serve")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/wophost", "WOPHOST_LISTEN=" + addr}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// The host's plugins share its process group and its output: a host
	// killed after a failure takes them along, and Wait does not wait on
	// output they still hold.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed once the host has exited, with its error in waitErr.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	ready := false
	deadline := time.Now().Add(2 * time.Minute)
	for !ready && time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("host serve exited before it was ready: %v\n%s", waitErr, logs.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		cancel()
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		t.Fatalf("/readyz did not answer 200 within 2 minutes\n%s", logs.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Errorf("host serve after SIGTERM: %v\n%s", waitErr, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("host serve did not stop within a minute of SIGTERM\n%s", logs.String())
	}
	fi, err := os.Stat("/var/lib/wophost/plugins")
	if err != nil {
		t.Fatalf("host serve wrote no state under /var/lib/wophost: %v\n%s", err, logs.String())
	}
	if u, err := user.LookupId(fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid)); err != nil || u.Username != "wophost" {
		t.Errorf("the state is not the user wophost's: %+v %v", u, err)
	}
}

// verifyUnit checks the installed unit with systemd-analyze verify, when
// the machine has it.
func verifyUnit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze is not installed: the unit is not verified")
		return
	}
	out, err := exec.Command("systemd-analyze", "verify", "/usr/lib/systemd/system/wophost.service").CombinedOutput()
	if err != nil || strings.Contains(string(out), "wophost.service") {
		t.Errorf("systemd-analyze verify wophost.service: %v\n%s", err, out)
	}
}

// syncBuffer is an output buffer the process's output copiers and the
// test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
