// Command probe is the node pack the integration tests drive: its nodes
// call host services in every way a pack can, legal and not.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/wop"
)

//go:embed pack.json
var manifest []byte

type callInput struct {
	Family  string          `json:"family"`
	Method  string          `json:"method"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadText, when set, is sent as the payload byte for byte: a
	// payload the node's own input would not carry (a duplicate member).
	PayloadText string `json:"payloadText,omitempty"`
	PIDFile     string `json:"pidfile,omitempty"`
	// Called, when set, is a file the node writes once the call has
	// answered; the node then waits for the file Until, so that a test
	// acts between the call and the node's return.
	Called string `json:"called,omitempty"`
	Until  string `json:"until,omitempty"`
	// Fail makes the node fail once Until came, whatever the call
	// answered.
	Fail bool `json:"fail,omitempty"`
}

type sleepInput struct {
	MS     int    `json:"ms"`
	Marker string `json:"marker,omitempty"`
	// Started, passed on to the plugin, is a file it writes as the call
	// reaches it.
	Started string `json:"started,omitempty"`
	// InPack sleeps in pack code instead of in the plugin.
	InPack  bool   `json:"inPack,omitempty"`
	PIDFile string `json:"pidfile,omitempty"`
	// Until, with InPack, ends the sleep early as soon as this file
	// exists, so a test holds a call in flight for exactly as long as it
	// needs: ms bounds the wait should the file never come.
	Until string `json:"until,omitempty"`
	// Log, when set, is a file the node appends its pack's pid to, a
	// line, as it starts: a test counts the node's runs on every host.
	Log string `json:"log,omitempty"`
}

type markerInput struct {
	Marker string `json:"marker"`
}

func main() {
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes: map[string]pack.Node{
			"probe.echo": func(ctx *pack.Ctx, input json.RawMessage) (any, error) {
				var out json.RawMessage
				err := ctx.Call("test.echo", "echo", input, &out)
				return out, err
			},
			"probe.call": pack.TypedNode(func(ctx *pack.Ctx, in *callInput) (json.RawMessage, error) {
				ctx.Logger.Debug("probe calling", "family", in.Family, "method", in.Method)
				if in.PIDFile != "" {
					if err := writePIDs(ctx, in.PIDFile); err != nil {
						return nil, err
					}
				}
				payload := in.Payload
				if in.PayloadText != "" {
					payload = json.RawMessage(in.PayloadText)
				}
				if payload == nil {
					payload = json.RawMessage(`{}`)
				}
				var out json.RawMessage
				err := ctx.Call(in.Family, in.Method, payload, &out)
				if in.Called != "" {
					if werr := os.WriteFile(in.Called, []byte("called"), 0o600); werr != nil {
						return nil, werr
					}
					if _, werr := sleepInPack(ctx, &sleepInput{MS: 60000, Until: in.Until}); werr != nil {
						return nil, werr
					}
					if in.Fail {
						return nil, wop.Errorf("probe.failed", "the node failed after its call, as asked")
					}
				}
				return out, err
			}),
			"probe.sleep": pack.TypedNode(func(ctx *pack.Ctx, in *sleepInput) (any, error) {
				if in.Log != "" {
					if err := appendLine(in.Log, strconv.Itoa(os.Getpid())); err != nil {
						return nil, err
					}
				}
				if in.PIDFile != "" {
					if err := writePIDs(ctx, in.PIDFile); err != nil {
						return nil, err
					}
				}
				if in.InPack {
					return sleepInPack(ctx, in)
				}
				var out json.RawMessage
				err := ctx.Call("test.echo", "sleep", in, &out)
				return out, err
			}),
			// probe.append acts on the world from pack code: it appends a
			// line to a file and answers how many lines the file holds,
			// so a test counts every time the node's code runs.
			"probe.append": pack.TypedNode(func(ctx *pack.Ctx, in *struct {
				File string `json:"file"`
				Line string `json:"line"`
			}) (any, error) {
				f, err := os.OpenFile(in.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return nil, err
				}
				if _, err := f.WriteString(in.Line + "\n"); err != nil {
					f.Close()
					return nil, err
				}
				if err := f.Close(); err != nil {
					return nil, err
				}
				data, err := os.ReadFile(in.File)
				if err != nil {
					return nil, err
				}
				return map[string]int{"lines": strings.Count(string(data), "\n")}, nil
			}),
			"probe.needsai": pack.TypedNode(func(ctx *pack.Ctx, in *markerInput) (any, error) {
				// Reaching this line means the host let the node run.
				if err := os.WriteFile(in.Marker, []byte("ran"), 0o600); err != nil {
					return nil, err
				}
				return map[string]bool{"ran": true}, nil
			}),
			"probe.ctx": func(ctx *pack.Ctx, _ json.RawMessage) (any, error) {
				var plugin json.RawMessage
				if err := ctx.Call("test.echo", "deadline", map[string]any{}, &plugin); err != nil {
					return nil, err
				}
				out := map[string]any{
					"plugin":        plugin,
					"runId":         ctx.Run.RunID,
					"aiEnvelopeNil": ctx.AIEnvelope == nil,
					"mcpNil":        ctx.MCP == nil,
				}
				if d, ok := ctx.Deadline(); ok {
					out["pack"] = d.UTC().Format(time.RFC3339Nano)
				}
				// A nil family field is safe to call and refuses cleanly.
				_, err := ctx.AIEnvelope.Generate(ctx, nil)
				out["nilGenerateError"] = err
				return out, nil
			},
			// probe.loop makes n echo calls, so a benchmark can measure one
			// ctx call with the node's own start-up amortised away.
			"probe.loop": pack.TypedNode(func(ctx *pack.Ctx, in *struct {
				N       int             `json:"n"`
				Payload json.RawMessage `json:"payload"`
			}) (any, error) {
				var out json.RawMessage
				for range in.N {
					if err := ctx.Call("test.echo", "echo", in.Payload, &out); err != nil {
						return nil, err
					}
				}
				return map[string]int{"calls": in.N}, nil
			}),
			// probe.steps makes three echo calls and reports each answer
			// or refusal, going on after a refusal. The second call carries
			// PROBE_VARIANT of the pack's environment, so a test changes
			// what the node asks (as a new version of its code would)
			// without changing its input.
			"probe.steps": func(ctx *pack.Ctx, _ json.RawMessage) (any, error) {
				steps := []map[string]any{{"step": 1}, {"step": 2, "variant": os.Getenv("PROBE_VARIANT")}, {"step": 3}}
				out := make([]any, len(steps))
				for i, s := range steps {
					var res json.RawMessage
					if err := ctx.Call("test.echo", "echo", s, &res); err != nil {
						out[i] = map[string]string{"error": err.Error()}
						continue
					}
					out[i] = res
				}
				return out, nil
			},
			"probe.validated": func(_ *pack.Ctx, input json.RawMessage) (any, error) {
				return input, nil
			},
		},
	})
}

// sleepInPack sleeps in.MS milliseconds in pack code, or until the file
// in.Until exists, or until the node's context ends.
func sleepInPack(ctx *pack.Ctx, in *sleepInput) (any, error) {
	timer := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
	defer timer.Stop()
	var poll <-chan time.Time
	if in.Until != "" {
		ticker := time.NewTicker(10 * time.Millisecond)
		defer ticker.Stop()
		poll = ticker.C
	}
	for {
		select {
		case <-timer.C:
			return map[string]bool{"slept": true}, nil
		case <-poll:
			if _, err := os.Stat(in.Until); err == nil {
				return map[string]bool{"released": true}, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// writePIDs records the pack's pid and the test plugin's pid, so a test
// can check that neither outlives the host.
func writePIDs(ctx *pack.Ctx, path string) error {
	var plugin struct {
		PID int `json:"pid"`
	}
	if err := ctx.Call("test.echo", "pid", map[string]any{}, &plugin); err != nil {
		return err
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", os.Getpid(), plugin.PID), 0o600)
}

// appendLine appends line and a newline to the file at path, in one write
// on a file opened for appending, so that lines of several processes do
// not mix.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
