package sandbox

import (
	"reflect"
	"slices"
	"testing"
)

func TestUnmet(t *testing.T) {
	for _, c := range []struct {
		name              string
		declared, allowed []string
		want              []string
	}{
		{"nothing declared", nil, []string{NetOutbound}, nil},
		{"crypto and clock need no grant", []string{"crypto", "clock"}, nil, nil},
		{"granted as declared", []string{NetOutbound, Subprocess}, []string{Subprocess, NetOutbound}, nil},
		{"nothing allowed", []string{FSRead, EnvRead}, nil, []string{FSRead, EnvRead}},
		{"a near miss grants nothing", []string{NetOutbound}, []string{"net.outbond"}, []string{NetOutbound}},
		{"a near miss of net.dns", []string{NetDNS}, []string{"net.dn"}, []string{NetDNS}},
		{"net.outbound covers net.dns", []string{NetDNS}, []string{NetOutbound}, nil},
		{"net.dns does not cover net.outbound", []string{NetOutbound}, []string{NetDNS}, []string{NetOutbound}},
		{"fs.read does not cover fs.write", []string{FSWrite}, []string{FSRead}, []string{FSWrite}},
		{"in the order declared", []string{Subprocess, FSRead, FSWrite, "crypto"}, []string{FSRead}, []string{Subprocess, FSWrite}},
	} {
		if got := Unmet(c.declared, c.allowed); !slices.Equal(got, c.want) {
			t.Errorf("%s: Unmet(%q, %q) = %q, want %q", c.name, c.declared, c.allowed, got, c.want)
		}
	}
}

func TestGrant(t *testing.T) {
	read, write := []string{"/etc/ssl"}, []string{"/var/cache/x"}
	all := []string{NetDNS, NetOutbound, Subprocess, FSRead, FSWrite, EnvRead}
	for _, c := range []struct {
		name              string
		declared, allowed []string
		want              Grants
		tokens            string
	}{
		{"allowed, not declared: nothing", nil, all, Grants{}, ""},
		{"declared, not allowed: nothing", all, nil, Grants{}, ""},
		{"a near miss grants nothing", []string{NetOutbound, Subprocess}, []string{"net.outbond", "subproces"}, Grants{}, ""},
		{"crypto and clock grant nothing to contain", []string{"crypto", "clock"}, nil, Grants{}, ""},
		{"net.dns under net.outbound is net.dns", []string{NetDNS}, []string{NetOutbound}, Grants{Network: NetDNS}, "net.dns"},
		{"net.outbound brings net.dns", []string{NetOutbound}, []string{NetOutbound}, Grants{Network: NetOutbound}, "net.dns,net.outbound"},
		{"net.outbound over net.dns", []string{NetDNS, NetOutbound}, []string{NetDNS, NetOutbound}, Grants{Network: NetOutbound}, "net.dns,net.outbound"},
		{"net.dns does not grant net.outbound", []string{NetOutbound}, []string{NetDNS}, Grants{}, ""},
		{"the paths go with their grant", []string{FSRead, FSWrite}, []string{FSRead, FSWrite},
			Grants{FSRead: true, FSWrite: true, ReadPaths: read, WritePaths: write}, "fs.read,fs.write"},
		{"fs.read alone: no write paths", []string{FSRead}, all, Grants{FSRead: true, ReadPaths: read}, "fs.read"},
		{"subprocess and env.read", []string{Subprocess, EnvRead, "clock"}, all, Grants{Subprocess: true, Env: true}, "env.read,subprocess"},
	} {
		g := Grant(c.declared, c.allowed, read, write)
		if !reflect.DeepEqual(g, c.want) {
			t.Errorf("%s: Grant(%q, %q) = %+v, want %+v", c.name, c.declared, c.allowed, g, c.want)
		}
		if got := g.Tokens(); got != c.tokens {
			t.Errorf("%s: Tokens() = %q, want %q", c.name, got, c.tokens)
		}
	}

	// The grant keeps paths of its own: the policy's lists stay the
	// policy's.
	g := Grant([]string{FSRead}, []string{FSRead}, read, nil)
	g.ReadPaths[0] = "/"
	if read[0] != "/etc/ssl" {
		t.Errorf("changing a grant's read paths changed the policy's: %q", read)
	}
}
