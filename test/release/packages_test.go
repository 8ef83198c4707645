package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// packaged is one path a package installs: its type and mode as ls
// shows them ("-rwxr-xr-x", "drwxr-xr-x", "l…" for a link), its target
// for a link, and whether it is a config file kept across upgrades.
type packaged struct {
	perms  string
	target string
	config bool
}

// wantPackaged is what the .deb and the .rpm install: the programs under
// /usr/lib/wophost (not /usr/bin/host, Debian's bind9-host's), the host
// as /usr/bin/wophost, the config, the unit and the documentation, all
// owned by root.
func wantPackaged(t *testing.T) map[string]packaged {
	t.Helper()
	want := map[string]packaged{
		"/usr/lib/wophost":                        {perms: "drwxr-xr-x"},
		"/etc/wophost":                            {perms: "drwxr-xr-x"},
		"/usr/share/doc/wophost":                  {perms: "drwxr-xr-x"},
		"/usr/bin/wophost":                        {perms: "l", target: "/usr/lib/wophost/host"},
		"/etc/wophost/host.hcl":                   {perms: "-rw-r--r--", config: true},
		"/usr/lib/systemd/system/wophost.service": {perms: "-rw-r--r--"},
		"/usr/share/doc/wophost/README.md":        {perms: "-rw-r--r--"},
		"/usr/share/doc/wophost/install.md":       {perms: "-rw-r--r--"},
	}
	for _, p := range programs(t, "linux") {
		want["/usr/lib/wophost/"+p] = packaged{perms: "-rwxr-xr-x"}
	}
	return want
}

// packageFile finds the one package of the pattern in the release.
func packageFile(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(theRelease(t).dir, pattern))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s in %s: %v %v, want one package", pattern, theRelease(t).dir, m, err)
	}
	return m[0]
}

// compare fails t for every path of got that is not as wanted, and every
// wanted path missing.
func compare(t *testing.T, pkg string, got, want map[string]packaged) {
	t.Helper()
	for path, w := range want {
		g, ok := got[path]
		switch {
		case !ok:
			t.Errorf("%s does not install %s", pkg, path)
		case w.perms == "l" && (!strings.HasPrefix(g.perms, "l") || g.target != w.target):
			t.Errorf("%s: %s is %s -> %q, want a link to %s", pkg, path, g.perms, g.target, w.target)
		case w.perms != "l" && g.perms != w.perms:
			t.Errorf("%s: %s has mode %s, want %s", pkg, path, g.perms, w.perms)
		case g.config != w.config:
			t.Errorf("%s: %s is a config file: %v, want %v", pkg, path, g.config, w.config)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok && !isParent(path, want) {
			t.Errorf("%s installs %s, which a release does not", pkg, path)
		}
	}
}

// isParent reports whether path is a directory above a wanted path
// (/usr, /usr/lib), which a .deb lists too.
func isParent(path string, want map[string]packaged) bool {
	for w := range want {
		if strings.HasPrefix(w, path+"/") {
			return true
		}
	}
	return false
}

// debLine is a line of `dpkg-deb -c`: mode, owner/group, size, date,
// time, path, and the target after " -> " for a link.
var debLine = regexp.MustCompile(`^(\S+) (\S+)/(\S+) +\d+ \S+ \S+ \.(\S*)(?: -> (\S+))?$`)

// The .deb of each Linux platform installs what a release installs, as
// root's, with /etc/wophost/host.hcl its one conffile and the scripts
// that add the user and stop the service.
func TestDebContents(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed: the .deb is not checked")
	}
	debs, _ := filepath.Glob(filepath.Join(theRelease(t).dir, "*.deb"))
	if len(debs) == 0 {
		t.Fatalf("%s holds no .deb", theRelease(t).dir)
	}
	for _, deb := range debs {
		out, err := exec.Command("dpkg-deb", "-c", deb).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: %v", deb, err)
		}
		conf, err := exec.Command("dpkg-deb", "-I", deb, "conffiles").Output()
		if err != nil {
			t.Fatalf("dpkg-deb -I %s conffiles: %v", deb, err)
		}
		conffiles := strings.Fields(string(conf))
		got := map[string]packaged{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			m := debLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("dpkg-deb -c line %q: unexpected", line)
				continue
			}
			path := strings.TrimSuffix(m[4], "/")
			if path == "" {
				continue
			}
			if m[2] != "root" || m[3] != "root" {
				t.Errorf("%s: %s is owned by %s:%s, want root", filepath.Base(deb), path, m[2], m[3])
			}
			got[path] = packaged{perms: m[1], target: m[5], config: slices.Contains(conffiles, path)}
		}
		compare(t, filepath.Base(deb), got, wantPackaged(t))
		ctrl, err := exec.Command("dpkg-deb", "-I", deb).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, script := range []string{"postinst", "prerm", "postrm"} {
			if !strings.Contains(string(ctrl), " "+script+" ") {
				t.Errorf("%s has no %s script:\n%s", filepath.Base(deb), script, ctrl)
			}
		}
	}
}

// The .rpm of each Linux platform installs the same, with host.hcl
// %config(noreplace), and the same scripts; without rpm on the machine
// it is not read.
func TestRPMContents(t *testing.T) {
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm is not installed (Debian's package rpm provides it): the .rpm is not checked")
	}
	rpms, _ := filepath.Glob(filepath.Join(theRelease(t).dir, "*.rpm"))
	if len(rpms) == 0 {
		t.Fatalf("%s holds no .rpm", theRelease(t).dir)
	}
	for _, file := range rpms {
		out, err := exec.Command("rpm", "-qp", "--queryformat",
			`[%{FILEMODES:perms}|%{FILEUSERNAME}|%{FILEGROUPNAME}|%{FILEFLAGS:fflags}|%{FILENAMES}|%{FILELINKTOS}\n]`, file).Output()
		if err != nil {
			t.Fatalf("rpm -qp %s: %v", file, err)
		}
		got := map[string]packaged{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 6 {
				t.Errorf("rpm line %q: unexpected", line)
				continue
			}
			if f[1] != "root" || f[2] != "root" {
				t.Errorf("%s: %s is owned by %s:%s, want root", filepath.Base(file), f[4], f[1], f[2])
			}
			// c: %config, n: noreplace.
			got[f[4]] = packaged{perms: f[0], target: f[5], config: strings.Contains(f[3], "c") && strings.Contains(f[3], "n")}
		}
		compare(t, filepath.Base(file), got, wantPackaged(t))
		scripts, err := exec.Command("rpm", "-qp", "--scripts", file).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet"} {
			if !strings.Contains(string(scripts), s) {
				t.Errorf("%s has no %s", filepath.Base(file), s)
			}
		}
	}
}

// Each Linux platform of the release has one .deb and one .rpm.
func TestPackagesPerPlatform(t *testing.T) {
	entries, err := os.ReadDir(theRelease(t).dir)
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, e := range entries {
		if m := archiveName.FindStringSubmatch(e.Name()); m != nil && m[2] == "linux" {
			arches = append(arches, m[3])
		}
	}
	sort.Strings(arches)
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}
	for _, a := range arches {
		packageFile(t, "wophost_*_"+a+".deb")
		packageFile(t, "wophost-*."+rpmArch[a]+".rpm")
	}
}

// The packages' version is VERSION without its v; a build past a tag
// sorts after the tag (1.2.3+4.gabc1234), and one on no tag gets a
// version a package may have (0.0.0+git.abc1234).
func TestPackageVersion(t *testing.T) {
	for version, want := range map[string]string{
		"v1.2.3":                  "1.2.3",
		"v1.2.3-dirty":            "1.2.3+dirty",
		"v1.2.3-4-gabc1234":       "1.2.3+4.gabc1234",
		"v1.2.3-4-gabc1234-dirty": "1.2.3+4.gabc1234.dirty",
		"abc1234":                 "0.0.0+git.abc1234",
		"abc1234-dirty":           "0.0.0+git.abc1234.dirty",
	} {
		cmd := exec.Command("make", "-n", "release-packages", "RELEASE_PLATFORMS=linux/amd64", "VERSION="+version)
		cmd.Dir = testbin.SourceDir("")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n release-packages VERSION=%s: %v\n%s", version, err, out)
		}
		if !strings.Contains(string(out), "PKG_VERSION='"+want+"' ") {
			t.Errorf("VERSION %s: the packages are not built as %s:\n%s", version, want, out)
		}
	}
}

// make release empties DIST before it builds, so it refuses a DIST it did
// not make, leaving its files as they were, and takes one it made.
func TestReleaseRefusesAForeignDist(t *testing.T) {
	dist := t.TempDir()
	keep := filepath.Join(dist, "notes.txt")
	if err := os.WriteFile(keep, []byte("the operator's"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "release", "DIST="+dist, "RELEASE_PLATFORMS=none/none")
	cmd.Dir = testbin.SourceDir("")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "was not made by make release") {
		t.Errorf("make release into a directory of other files: %v, want exit 2 naming it\n%s", err, out)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "the operator's" {
		t.Errorf("the directory's file after a refused release: %q %v", data, err)
	}
	// One make release made is emptied and built into; the platform
	// none/none fails the build at once, after the emptying.
	if err := os.WriteFile(filepath.Join(dist, ".wophost-dist"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("make", "--no-print-directory", "release", "DIST="+dist, "RELEASE_PLATFORMS=none/none")
	cmd.Dir = testbin.SourceDir("")
	out, _ = cmd.CombinedOutput()
	if strings.Contains(string(out), "was not made by make release") {
		t.Errorf("make release refused a directory it made:\n%s", out)
	}
	if _, err := os.Stat(keep); !os.IsNotExist(err) {
		t.Errorf("a directory make release made was not emptied: %v", err)
	}
}

// The unit runs the packaged host on the packaged config as the user the
// scripts make, reloads with SIGHUP, is hardened as docs/install.md says,
// and keeps open what containing packs needs: its cgroup delegated and
// writable, the system calls of Landlock and seccomp allowed, and no
// setting that would take them away.
func TestUnit(t *testing.T) {
	data, err := os.ReadFile(testbin.SourceDir("packaging/wophost.service"))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("unit line %q: not a setting", line)
			continue
		}
		settings[k] = append(settings[k], v)
	}
	for k, want := range map[string]string{
		"User":            "wophost",
		"Group":           "wophost",
		"ExecStart":       "/usr/lib/wophost/host --config /etc/wophost/host.hcl serve",
		"ExecReload":      "/bin/kill -HUP $MAINPID",
		"Restart":         "on-failure",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"ReadWritePaths":  "/var/lib/wophost",
		"PrivateTmp":      "yes",
		"ProtectHome":     "yes",
		"Delegate":        "yes",
		"KillMode":        "mixed",
	} {
		if got := settings[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v, want %s", k, got, want)
		}
	}
	for _, k := range []string{"ProtectControlGroups", "ProtectKernelTunables", "MemoryDenyWriteExecute", "ProcSubset", "PrivateUsers"} {
		if v, ok := settings[k]; ok {
			t.Errorf("%s=%v: it would take from packs' containment (cgroups, /proc/sys) or from packs with a JIT what they need", k, v)
		}
	}
	for _, filter := range settings["SystemCallFilter"] {
		if strings.HasPrefix(filter, "~") {
			for _, call := range []string{"landlock", "seccomp", "@sandbox"} {
				if strings.Contains(filter, call) {
					t.Errorf("SystemCallFilter=%s denies %s, which containment uses", filter, call)
				}
			}
			continue
		}
		for _, call := range []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp"} {
			if !slices.Contains(strings.Fields(filter), call) {
				t.Errorf("SystemCallFilter=%s does not allow %s, which containment uses", filter, call)
			}
		}
	}
	if d := string(data); !strings.Contains(d, "[Install]\nWantedBy=multi-user.target") {
		t.Error("the unit is not wanted by multi-user.target: enable would not start it at boot")
	}
}
