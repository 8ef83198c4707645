package release_test

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// installPage is the page on installing a release, whose blocks these
// tests check against the release (test/docs leaves them to them).
const installPage = "docs/install.md"

// docBlock is one fenced block of the page: its info string's words after
// the language, as key=value, and its lines.
type docBlock struct {
	lang  string
	check string
	line  int
	text  string
}

func installBlocks(t *testing.T) []docBlock {
	t.Helper()
	src, err := os.ReadFile(testbin.SourceDir(installPage))
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	var body []string
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "```") {
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		if cur == nil {
			words := strings.Fields(strings.TrimPrefix(trimmed, "```"))
			cur = &docBlock{line: i + 1}
			if len(words) > 0 {
				cur.lang = words[0]
			}
			for _, w := range words[1:] {
				if v, ok := strings.CutPrefix(w, "check="); ok {
					cur.check = v
				}
			}
			body = nil
			continue
		}
		cur.text = strings.Join(body, "\n")
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		t.Fatalf("%s:%d: a block is never closed", installPage, cur.line)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no blocks", installPage)
	}
	return out
}

// step is one command of a transcript and the output shown after it.
type step struct {
	command string
	output  []string
}

// steps reads a block's "$ " lines and the lines after each.
func steps(text string) []step {
	var out []step
	for _, line := range strings.Split(text, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, step{command: cmd})
		} else if len(out) > 0 && line != "" {
			out[len(out)-1].output = append(out[len(out)-1].output, line)
		}
	}
	return out
}

// outputPattern matches what a step shows: "…" alone on a line stands
// for any lines, inside a line for any text.
func outputPattern(shown []string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^`)
	for _, l := range shown {
		if l == "…" {
			b.WriteString(`(?:.*\n)*`)
			continue
		}
		b.WriteString(strings.ReplaceAll(regexp.QuoteMeta(l), "…", `.*`) + `\n`)
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// asRoot rewrites a command for a test that runs as root: "sudo -u U"
// becomes runuser, and a plain "sudo " goes.
func asRoot(cmd string) string {
	if rest, ok := strings.CutPrefix(cmd, "sudo -u "); ok {
		u, rest, _ := strings.Cut(rest, " ")
		return "runuser -u " + u + " -- " + rest
	}
	return strings.ReplaceAll(strings.TrimPrefix(cmd, "sudo "), "&& sudo ", "&& ")
}

// forThisMachine names this machine's architecture where the page says
// amd64 (and x86_64, the rpm's name for it).
func forThisMachine(cmd string) string {
	if runtime.GOARCH == "arm64" {
		cmd = strings.ReplaceAll(cmd, "amd64", "arm64")
		cmd = strings.ReplaceAll(cmd, "x86_64", "aarch64")
	}
	return cmd
}

// downloads makes a directory holding the release's files, as an operator
// downloads them, the release's public key as wophost-release.pub.json,
// and a bin directory whose wophost is the release's host, the wophost
// already trusted.
func downloads(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	entries, err := os.ReadDir(theRelease(t).dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Symlink(filepath.Join(theRelease(t).dir, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub, err := os.ReadFile(theRelease(t).pubKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wophost-release.pub.json"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(theRelease(t).host, filepath.Join(bin, "wophost")); err != nil {
		t.Fatal(err)
	}
	return dir, bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// runSteps runs a transcript's commands in dir with PATH path, through
// sh, each output compared with what the page shows.
func runSteps(t *testing.T, b docBlock, dir, path string, rewrite func(string) string) {
	t.Helper()
	ss := steps(b.text)
	if len(ss) == 0 {
		t.Fatalf("%s:%d: a block of check=%s without a \"$ \" command", installPage, b.line, b.check)
	}
	for _, s := range ss {
		cmd := exec.Command("sh", "-c", rewrite(s.command))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s:%d: %s: %v\n%s", installPage, b.line, s.command, err, out)
		}
		got := strings.TrimRight(string(out), "\n")
		if got != "" {
			got += "\n"
		}
		if !outputPattern(s.output).MatchString(got) {
			t.Errorf("%s:%d: %s printed\n%s\nthe page shows\n%s", installPage, b.line, s.command, got, strings.Join(s.output, "\n"))
		}
	}
}

// Every block of the page is checked against the release, by its check=
// word: archive transcripts run in a directory of the release's files,
// with the release's host as the trusted wophost (it verifies SHA256SUMS
// with the release's public key); make lines run with make -n; rpm
// commands name one .rpm of the release, which rpm reads when it is
// installed; systemd commands name the packaged unit and what it allows
// (reload needs ExecReload). The deb transcripts install the .deb, so
// TestInstallDocDeb runs them, with WOPHOST_TEST_INSTALL=1. A block of any
// other kind fails.
func TestInstallDocBlocks(t *testing.T) {
	dir, path := downloads(t)
	unit, err := os.ReadFile(testbin.SourceDir("packaging/wophost.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range installBlocks(t) {
		name := fmt.Sprintf("%d_%s", b.line, b.check)
		ok := t.Run(name, func(t *testing.T) {
			if b.lang != "sh" {
				t.Fatalf("%s:%d: a %q block; only sh blocks with check= are checked", installPage, b.line, b.lang)
			}
			switch b.check {
			case "archive":
				runSteps(t, b, dir, path, forThisMachine)
			case "deb":
				if len(steps(b.text)) == 0 {
					t.Fatal("a deb block without a \"$ \" command")
				}
				t.Skip("installs the .deb: TestInstallDocDeb runs it")
			case "make":
				for _, line := range commandLines(b.text) {
					words := strings.Fields(line)
					if words[0] != "make" {
						t.Errorf("%q: a make block holds make lines only", line)
						continue
					}
					cmd := exec.Command("make", append([]string{"-n"}, words[1:]...)...)
					cmd.Dir = testbin.SourceDir("")
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("%q: make -n: %v\n%s", line, err, out)
					}
				}
			case "rpm":
				checkRPMCommands(t, b)
			case "systemd":
				checkSystemdCommands(t, b, string(unit))
			default:
				t.Fatalf("%s:%d: check=%q: no checker for it", installPage, b.line, b.check)
			}
		})
		if !ok && b.check == "archive" {
			t.Fatalf("%s:%d failed; the blocks after it may depend on it", installPage, b.line)
		}
	}
}

// commandLines are a block's commands: its "$ " lines, or, in a block
// without them, every line but blanks and comments.
func commandLines(text string) []string {
	var out []string
	if ss := steps(text); len(ss) > 0 {
		for _, s := range ss {
			out = append(out, s.command)
		}
		return out
	}
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// checkRPMCommands checks each rpm command names, by its glob, exactly
// one .rpm of the release of this machine's architecture, and that rpm
// reads it as the package wophost when rpm is installed.
func checkRPMCommands(t *testing.T, b docBlock) {
	for _, line := range commandLines(b.text) {
		words := strings.Fields(forThisMachine(asRoot(line)))
		if words[0] != "rpm" || len(words) != 3 || (words[1] != "-i" && words[1] != "-U") {
			t.Errorf("%q: an rpm block holds `rpm -i|-U FILE` lines", line)
			continue
		}
		m, err := filepath.Glob(filepath.Join(theRelease(t).dir, words[2]))
		if err != nil || len(m) != 1 {
			t.Errorf("%q: %s matches %v in the release, want one .rpm", line, words[2], m)
			continue
		}
		if _, err := exec.LookPath("rpm"); err != nil {
			t.Logf("rpm is not installed: %s is not read", m[0])
			continue
		}
		out, err := exec.Command("rpm", "-qp", "--queryformat", "%{NAME}", m[0]).Output()
		if err != nil || string(out) != "wophost" {
			t.Errorf("rpm -qp %s: %q %v, want the package wophost", m[0], out, err)
		}
	}
}

// systemdVerbs are the systemctl verbs the page may show, each with what
// the unit must hold for it.
var systemdVerbs = map[string]string{
	"enable": "WantedBy=", "start": "ExecStart=", "stop": "ExecStart=", "restart": "ExecStart=",
	"status": "", "reload": "ExecReload=", "disable": "WantedBy=",
}

// checkSystemdCommands checks each systemctl and journalctl line names
// the packaged unit, wophost, with a verb the unit supports. systemd is
// not the machine's init where the tests run, so they do not run; the
// install test verifies the unit with systemd-analyze.
func checkSystemdCommands(t *testing.T, b docBlock, unit string) {
	for _, line := range commandLines(b.text) {
		words := strings.Fields(asRoot(line))
		switch words[0] {
		case "systemctl":
			var verb, name string
			for _, w := range words[1:] {
				switch {
				case strings.HasPrefix(w, "-"):
				case verb == "":
					verb = w
				default:
					name = w
				}
			}
			need, known := systemdVerbs[verb]
			if !known {
				t.Errorf("%q: systemctl %s is not a verb the page may show", line, verb)
			} else if need != "" && !strings.Contains(unit, "\n"+need) {
				t.Errorf("%q: the unit has no %s", line, need)
			}
			if name != "wophost" && name != "wophost.service" {
				t.Errorf("%q: names %q, not the packaged unit wophost", line, name)
			}
		case "journalctl":
			if !strings.Contains(line, "-u wophost") {
				t.Errorf("%q: does not name the unit wophost", line)
			}
		default:
			t.Errorf("%q: a systemd block holds systemctl and journalctl lines only", line)
		}
	}
}

// The deb transcripts of the page, run in order as root on this machine
// (WOPHOST_TEST_INSTALL=1): install, the version, the packaged config
// validated as the user wophost, then removal, purge, which keeps the
// state validate wrote, and the removal of that state and the user,
// after which nothing of the package is left.
func TestInstallDocDeb(t *testing.T) {
	if os.Getenv(installEnv) != "1" {
		t.Skipf("set %s=1 to run the page's .deb transcripts on this machine (root and dpkg)", installEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatal("installing the .deb needs root")
	}
	checkNotInstalled(t)
	t.Cleanup(func() { restoreMachine(t) })
	dir, path := downloads(t)
	ran := 0
	for _, b := range installBlocks(t) {
		if b.check != "deb" {
			continue
		}
		runSteps(t, b, dir, path, func(cmd string) string { return forThisMachine(asRoot(cmd)) })
		ran++
	}
	if ran < 2 {
		t.Fatalf("%s has %d deb blocks; want the install and the removal", installPage, ran)
	}
	for _, p := range installedPaths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("after the page's removal %s is still there", p)
		}
	}
	if _, err := user.Lookup("wophost"); err == nil {
		t.Error("after the page's removal the user wophost is still there")
	}
	if _, err := user.LookupGroup("wophost"); err == nil {
		t.Error("after the page's removal the group wophost is still there")
	}
}

// The page's table of where the files live names every file the packages
// install, and each path it names is installed by them or made by their
// scripts and unit.
func TestInstallDocFileTable(t *testing.T) {
	src, err := os.ReadFile(testbin.SourceDir(installPage))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "## Where the files live")
	if !ok {
		t.Fatalf("%s has no section \"Where the files live\"", installPage)
	}
	cell := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	named := map[string]bool{}
	for _, m := range cell.FindAllStringSubmatch(table, -1) {
		named[m[1]] = true
	}
	want := wantPackaged(t)
	var made []byte
	for _, f := range []string{"packaging/wophost.service", "packaging/scripts/postinstall.sh", "packaging/scripts/postremove.sh"} {
		b, err := os.ReadFile(testbin.SourceDir(f))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, b...)
	}
	for path := range named {
		_, installed := want[path]
		switch {
		case installed:
		case path == "/usr/lib/wophost/wophost-NAME":
		case strings.Contains(string(made), path):
		default:
			t.Errorf("the table names %s, which the packages neither install nor make", path)
		}
	}
	for path, p := range want {
		if strings.HasPrefix(p.perms, "d") {
			continue
		}
		if strings.HasPrefix(path, "/usr/share/doc/wophost/") {
			path = "/usr/share/doc/wophost"
		} else if strings.HasPrefix(path, "/usr/lib/wophost/wophost-") && path != "/usr/lib/wophost/wophost-launch" {
			path = "/usr/lib/wophost/wophost-NAME"
		}
		if !named[path] {
			t.Errorf("the packages install %s, which the table does not name", path)
		}
	}
}
