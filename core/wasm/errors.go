package wasm

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownNode is wrapped, with the typeId, by Invoke of a node the module
// does not list.
var ErrUnknownNode = errors.New("the module lists no such node")

// ABIError refuses a module whose openwop_abi_version() this runtime does not
// serve.
type ABIError struct {
	Reported int
	Served   []int
}

func (e *ABIError) Error() string {
	served := make([]string, len(e.Served))
	for i, v := range e.Served {
		served[i] = fmt.Sprint(v)
	}
	return fmt.Sprintf("openwop_abi_version: the module reports ABI version %d; this host serves %s",
		e.Reported, strings.Join(served, ", "))
}

// ExportError lists every required export that is missing or has the wrong
// signature, the memory export included.
type ExportError struct {
	Problems []string
}

func (e *ExportError) Error() string {
	return "the module's exports do not follow the ABI: " + strings.Join(e.Problems, "; ")
}

// ImportError lists every import the host does not provide: an unknown
// module or name, or a known name declared with a signature the ABI does not
// allow.
type ImportError struct {
	Problems []string
}

func (e *ImportError) Error() string {
	return "the module imports what this host does not provide: " + strings.Join(e.Problems, "; ")
}

// MemoryError refuses at Load a module whose declared minimum memory is
// already above the pack's cap; nothing ran, so it is not a CapBreach.
type MemoryError struct {
	MinBytes   int64
	LimitBytes int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("memory: the module declares a minimum of %d bytes (%d pages), above the cap of %d bytes",
		e.MinBytes, e.MinBytes/pageSize, e.LimitBytes)
}

// Kinds of CapBreach.
const (
	BreachMemory        = "wasm-memory"
	BreachExecutionTime = "wasm-execution-time"
)

// CapBreach reports an invocation stopped by one of the pack's caps. For
// BreachMemory, Limit is the cap and Observed the size the refused grow asked
// for, both in bytes; for BreachExecutionTime both are milliseconds of the
// module's own execution.
type CapBreach struct {
	Kind     string
	Limit    int64
	Observed int64
}

func (e *CapBreach) Error() string {
	unit := "bytes"
	if e.Kind == BreachExecutionTime {
		unit = "ms"
	}
	return fmt.Sprintf("cap breached: %s: limit %d %s, observed %d %s", e.Kind, e.Limit, unit, e.Observed, unit)
}

// Trap reports a module that trapped or exited: unreachable, an access out of
// bounds, a stack overflow, a Go guest's panic, or a bad argument it passed
// to an import.
type Trap struct {
	Message string
}

func (e *Trap) Error() string {
	return "the module trapped: " + e.Message
}

// EnvelopeError reports a response that is not a valid envelope: not JSON, a
// missing or wrong member, or a (ptr, len) outside the module's memory.
type EnvelopeError struct {
	Problem string
}

func (e *EnvelopeError) Error() string {
	return "the module's response is not a valid envelope: " + e.Problem
}
