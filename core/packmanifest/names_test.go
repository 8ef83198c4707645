package packmanifest

import (
	"strings"
	"testing"
)

// CheckName admits what Parse admits as a pack's name and refuses what it
// refuses, with its message.
func TestCheckName(t *testing.T) {
	for _, name := range []string{"community.wophost.greeter", "private.host.my-pack", "vendor.acme.kv.v2"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v; want nil", name, err)
		}
	}
	for _, name := range []string{"", "community.greeter", "acme.kv.demo", "Community.acme.demo", "community.acme." + strings.Repeat("x", 256)} {
		err := CheckName(name)
		if err == nil {
			t.Errorf("CheckName(%q) = nil; want an error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "name ") {
			t.Errorf("CheckName(%q) = %q; want it to start with the field's name", name, err)
		}
	}
	if err := CheckName("community.greeter"); err == nil || !strings.Contains(err.Error(), "must be a scope") {
		t.Errorf("CheckName(community.greeter) = %v; want the grammar's message", err)
	}
}

// CheckTypeID follows a node's typeId grammar.
func TestCheckTypeID(t *testing.T) {
	for _, id := range []string{"greeter.welcome", "acme.kv.get"} {
		if err := CheckTypeID(id); err != nil {
			t.Errorf("CheckTypeID(%q) = %v; want nil", id, err)
		}
	}
	for _, id := range []string{"", "welcome", "Greeter.welcome", "greeter.", strings.Repeat("a.", 200)} {
		if err := CheckTypeID(id); err == nil {
			t.Errorf("CheckTypeID(%q) = nil; want an error", id)
		}
	}
}
