package sandbox

import (
	"encoding/json"
	"fmt"
)

// LaunchArg is the first argument that makes the host binary the
// launcher (see IsLaunch). It cannot be mistaken for a command: commands
// do not start with an underscore.
const LaunchArg = "__wophost-launch"

// specEnv is the variable that carries the Spec from the host to the
// launcher. The launcher removes it before exec.
const specEnv = "WOPHOST_SANDBOX_LAUNCH"

// GrantsEnv is the variable a contained process finds set to its granted
// requirements (Grants.Tokens), so that its SDK can tell a refusal of the
// sandbox from another failure.
const GrantsEnv = "WOPHOST_SANDBOX"

// StateDirEnv is the variable a contained process finds set to its own
// directory for state, the one directory outside its temporary directory
// it may write.
const StateDirEnv = "WOPHOST_STATE_DIR"

// Network settings of a Spec.
const (
	networkNone = ""
	networkDNS  = NetDNS
	networkAll  = NetOutbound
)

// Spec is what the launcher applies before it execs the entry. The host
// builds it (Prepare); the launcher trusts it, being the host's own child.
type Spec struct {
	// ExecFD is the descriptor, open in the launcher, of the entry binary
	// the host checked: the launcher execs that file, not a path.
	ExecFD int `json:"execFd"`
	// Script is set when the entry starts with "#!": its descriptor must
	// stay open across exec for the interpreter to read it.
	Script bool `json:"script,omitempty"`
	// SHA256 is the lowercase hex digest the entry must still have just
	// before exec, or "".
	SHA256 string `json:"sha256,omitempty"`

	// Cgroups are the cgroup.procs (v2) or tasks (v1) files the launcher
	// writes its pid into, before anything else.
	Cgroups []string `json:"cgroups,omitempty"`
	// AddressSpace is RLIMIT_AS in bytes, the memory cap where no memory
	// cgroup is writable; 0 sets none.
	AddressSpace uint64 `json:"addressSpace,omitempty"`

	// UID and GID, when SwitchUser is set, are the ids the launcher runs
	// the entry as, with no supplementary groups.
	SwitchUser bool `json:"switchUser,omitempty"`
	UID        int  `json:"uid,omitempty"`
	GID        int  `json:"gid,omitempty"`

	// DropCapabilities empties the bounding, ambient, effective,
	// permitted and inheritable sets.
	DropCapabilities bool `json:"dropCapabilities,omitempty"`

	// Landlock applies the filesystem, network and scope ruleset.
	Landlock bool `json:"landlock,omitempty"`
	// ReadExec are directories (or files) whose files may be read and
	// executed: the pack directory.
	ReadExec []string `json:"readExec,omitempty"`
	// Read are directories (or files) that may be read, not executed.
	Read []string `json:"read,omitempty"`
	// ReadWrite are directories (or files) that may be read and written.
	ReadWrite []string `json:"readWrite,omitempty"`

	// Seccomp applies the system call filter.
	Seccomp bool `json:"seccomp,omitempty"`
	// Network is "", NetDNS or NetOutbound (see Grants.Network).
	Network string `json:"network,omitempty"`
	// ConnectPorts are TCP ports the process may connect to whatever its
	// network grant (Policy.ConnectPorts).
	ConnectPorts []uint16 `json:"connectPorts,omitempty"`
	// Subprocess lets the process start other processes and programs.
	Subprocess bool `json:"subprocess,omitempty"`
}

func encodeSpec(s *Spec) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode the sandbox spec: %w", err)
	}
	return string(b), nil
}

func decodeSpec(v string) (*Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("decode the sandbox spec: %w", err)
	}
	return &s, nil
}
