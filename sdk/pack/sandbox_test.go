package pack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// The errors the standard library returns for an operation Landlock or
// the seccomp filter refused, shaped as they are on Linux.
var (
	dialRefused = &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443},
		Err: os.NewSyscallError("socket", syscall.EPERM)}
	connectRefused = &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443},
		Err: os.NewSyscallError("connect", syscall.EACCES)}
	listenRefused = &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{Port: 8080},
		Err: os.NewSyscallError("bind", syscall.EACCES)}
	// Go's resolver keeps only the text of the error under a DNSError,
	// and net.Dial wraps the lookup's failure in an OpError.
	lookupRefused = &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{
		Err: "dial udp 127.0.0.53:53: socket: operation not permitted", Name: "example.com", Server: "127.0.0.53:53"}}
	forkRefused  = &os.PathError{Op: "fork/exec", Path: "/usr/bin/git", Err: syscall.EPERM}
	lookPathDeny = &exec.Error{Name: "git", Err: syscall.EACCES}
	openRefused  = &os.PathError{Op: "open", Path: "/dev/null", Err: syscall.EACCES}
	mkdirRefused = &os.PathError{Op: "mkdir", Path: "/var/lib/x", Err: syscall.EACCES}
)

func TestSandboxDenialNamesTheRequirement(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"socket refused by seccomp", dialRefused, "net.outbound"},
		{"connect refused by Landlock", connectRefused, "net.outbound"},
		{"bind refused by Landlock", listenRefused, "net.outbound"},
		{"lookup refused", lookupRefused, "net.dns"},
		{"lookup alone", lookupRefused.Err, "net.dns"},
		{"fork refused", forkRefused, "subprocess"},
		{"fork refused, wrapped", fmt.Errorf("run git: %w", forkRefused), "subprocess"},
		{"look path refused", lookPathDeny, "subprocess"},
		{"clone refused", os.NewSyscallError("clone", syscall.EPERM), "subprocess"},
		// The path opens for reading here (or is not there): the refused
		// open was a write's.
		{"open refused", openRefused, "fs.write"},
		{"openat refused", &os.PathError{Op: "openat", Path: "no-such-file", Err: syscall.EACCES}, "fs.write"},
		{"mkdir refused", fmt.Errorf("cache: %w", mkdirRefused), "fs.write"},
		{"remove refused", &os.PathError{Op: "remove", Path: "/x", Err: syscall.EPERM}, "fs.write"},
		{"truncate refused", &os.PathError{Op: "truncate", Path: "/x", Err: syscall.EACCES}, "fs.write"},
		{"chmod refused", &os.PathError{Op: "chmod", Path: "/x", Err: syscall.EPERM}, "fs.write"},
		{"rename refused", &os.LinkError{Op: "rename", Old: "/a", New: "/b", Err: syscall.EXDEV}, ""},
		{"rename refused by Landlock", &os.LinkError{Op: "rename", Old: "/a", New: "/b", Err: syscall.EACCES}, "fs.write"},
		{"symlink refused", &os.LinkError{Op: "symlink", Old: "/a", New: "/b", Err: syscall.EACCES}, "fs.write"},
		// Near misses: a refusal the SDK cannot name, and failures that
		// are no refusal at all.
		{"stat refused", &os.PathError{Op: "stat", Path: "/x", Err: syscall.EPERM}, "unknown"},
		{"bare errno", fmt.Errorf("ioctl: %w", syscall.EPERM), "unknown"},
		{"read refused", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.EPERM)}, "unknown"},
		{"unix socket refused", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}, "unknown"},
		{"other system call refused", os.NewSyscallError("ptrace", syscall.EPERM), "unknown"},
		{"open of a missing file", &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, ""},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, ""},
		{"unknown host", &net.DNSError{Err: "no such host", Name: "example.invalid", IsNotFound: true}, ""},
		{"permission, not an errno", fmt.Errorf("open x: %w", os.ErrPermission), ""},
		{"plain error", errors.New("operation not permitted"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			we := sandboxDenial(tc.err)
			if tc.want == "" {
				if we != nil {
					t.Fatalf("%v: %v, want no sandbox failure", tc.err, we)
				}
				return
			}
			if we == nil {
				t.Fatalf("%v: no sandbox failure, want %s", tc.err, tc.want)
			}
			var details struct {
				RequestedCapability string `json:"requestedCapability"`
			}
			if err := json.Unmarshal(we.Details, &details); err != nil {
				t.Fatal(err)
			}
			if we.Code != wop.CodeSandboxCapabilityDenied || details.RequestedCapability != tc.want || we.Retryable {
				t.Errorf("%v: %s %s retryable=%v, want %s requestedCapability %s, not retryable", tc.err, we.Code, we.Details, we.Retryable, wop.CodeSandboxCapabilityDenied, tc.want)
			}
			if !strings.HasPrefix(we.Message, tc.err.Error()+" (") {
				t.Errorf("message %q does not keep %q", we.Message, tc.err.Error())
			}
		})
	}
}

// A node's own envelope is its answer, even when a refusal lies beside it
// in the chain.
func TestSandboxDenialLeavesTheNodesEnvelope(t *testing.T) {
	for _, err := range []error{
		wop.Errorf(wop.CodeNotFound, "no key"),
		fmt.Errorf("lookup: %w", wop.Errorf(wop.CodeUnavailable, "plugin restarting")),
		errors.Join(wop.Errorf("acme.locked", "held"), openRefused),
	} {
		if we := sandboxDenial(err); we != nil {
			t.Errorf("%v became %v", err, we)
		}
	}
}

func TestContainedByThePresenceOfTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{wire.EnvSandbox: "net.outbound,subprocess"}, true},
		{map[string]string{wire.EnvSandbox: ""}, true},
		{map[string]string{"WOPHOST_SANDBOXED": "1"}, false},
		{nil, false},
	} {
		lookup := func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok }
		if got := contained(lookup); got != tc.want {
			t.Errorf("%v: contained = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// Through Execute: a contained pack's node that fails on a refused
// operation fails with sandbox_capability_denied; the same node of a pack
// that is not contained fails as it always did, internal with its text.
func TestExecuteAttributesARefusalOnlyWhenContained(t *testing.T) {
	failing := func(err error) Node {
		return func(*Ctx, json.RawMessage) (any, error) { return nil, fmt.Errorf("fetch: %w", err) }
	}
	p := &Pack{
		Manifest: []byte(`{"name":"test.sbx","nodes":[{"typeId":"test.fetch"},{"typeId":"test.own"}]}`),
		Nodes: map[string]Node{
			"test.fetch": failing(dialRefused),
			"test.own": func(*Ctx, json.RawMessage) (any, error) {
				return nil, wop.Errorf("acme.denied", "the node's own")
			},
		},
	}
	run := func(contained bool, typeID string) *wop.Error {
		s := &server{p: p, logger: hclog.NewNullLogger(), maxBytes: wire.DefaultMaxMessageBytes,
			tracer: noop.NewTracerProvider().Tracer("test"), hosts: map[uint32]*wire.HostCaller{}, contained: contained}
		_, err := s.Execute(context.Background(), &wophostv1.ExecuteRequest{
			TypeId: typeID, Input: []byte(`{}`), Call: wire.CallContextToProto(wop.CallContext{RunID: "run_1", TypeID: typeID}),
		})
		if err == nil {
			t.Fatalf("%s succeeded", typeID)
		}
		return wire.FromStatus(err)
	}
	want := "fetch: " + dialRefused.Error()
	if we := run(true, "test.fetch"); we.Code != wop.CodeSandboxCapabilityDenied ||
		string(we.Details) != `{"requestedCapability":"net.outbound"}` || !strings.HasPrefix(we.Message, want) {
		t.Errorf("contained: %v %s, want sandbox_capability_denied naming net.outbound", we, we.Details)
	}
	if we := run(false, "test.fetch"); we.Code != wop.CodeInternal || we.Message != want || len(we.Details) != 0 {
		t.Errorf("not contained: %v %s, want internal %q", we, we.Details, want)
	}
	if we := run(true, "test.own"); we.Code != "acme.denied" {
		t.Errorf("contained, the node's own envelope: %v", we)
	}
}

func TestRefusedOpenForReadingNamesFSRead(t *testing.T) {
	refusedAgain := func(string) (*os.File, error) { return nil, syscall.EACCES }
	if got := openIntent("/any", refusedAgain); got != "fs.read" {
		t.Fatalf("an open refused again for reading: %s, want fs.read", got)
	}
	missing := func(string) (*os.File, error) { return nil, fs.ErrNotExist }
	if got := openIntent("/any", missing); got != "fs.write" {
		t.Fatalf("an open of a missing file: %s, want fs.write", got)
	}
}
