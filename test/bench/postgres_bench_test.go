package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// The PostgreSQL benchmarks run each measured path twice in one process:
// once on a host with the embedded backend (files and SQLite under its
// state directory) and once on a host with backend = "postgres" on a fresh
// database of the shared test server (pgtest.DSN, dropped afterwards).
// Without a server they skip, as the tests do.

// postgresStorage is the host block's storage block for dsn.
func postgresStorage(dsn string) string {
	return fmt.Sprintf("  storage {\n    backend = \"postgres\"\n    dsn     = %q\n  }\n", dsn)
}

// startBackendHosts starts two hosts of deployment, one per backend, and
// checks that the second keeps the state of each capability block named
// in caps in the database. The database is asked for first, so the
// benchmark skips before starting anything when there is no server.
func startBackendHosts(tb testing.TB, deployment string, caps ...string) (embedded, postgres *host.Host) {
	tb.Helper()
	dsn := pgtest.DSN(tb)
	embedded = startHost(tb, writeConfigIn(tb, "", deployment))
	postgres = startHost(tb, writeConfigIn(tb, postgresStorage(dsn), deployment))
	schemas := make([]string, len(caps))
	for i, c := range caps {
		schemas[i] = config.StorageSchema(c)
	}
	requireTables(tb, dsn, schemas...)
	return embedded, postgres
}

// requireTables fails tb unless each schema of the database of dsn holds
// a table: a host that ignored its storage block would otherwise time the
// embedded backend twice.
func requireTables(tb testing.TB, dsn string, schemas ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, schema := range schemas {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			tb.Fatalf("the postgres host keeps no table in schema %s", schema)
		}
	}
}

// timeBackends warms both paths up, then makes b.N calls on each,
// alternating call by call so that both see the same load on a shared
// machine, and reports the mean time per call of each, their ratio (the
// figure) and each path's p50. call gets the call's index, negative during
// the warm-up, so that each call can carry a key of its own.
func timeBackends(b *testing.B, embedded, postgres func(i int) error) {
	paths := []struct {
		name string
		call func(int) error
	}{{"embedded", embedded}, {"postgres", postgres}}
	for i := range warmCalls {
		for _, p := range paths {
			if err := p.call(-1 - i); err != nil {
				b.Fatalf("%s warm-up: %v", p.name, err)
			}
		}
	}
	lat := [2][]time.Duration{make([]time.Duration, b.N), make([]time.Duration, b.N)}
	var total [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k, p := range paths {
			t0 := time.Now()
			err := p.call(i)
			lat[k][i] = time.Since(t0)
			total[k] += lat[k][i]
			if err != nil {
				b.Fatalf("%s call %d: %v", p.name, i, err)
			}
		}
	}
	b.StopTimer()
	mean := func(k int) float64 { return float64(total[k].Nanoseconds()) / float64(b.N) }
	for k, p := range paths {
		slices.Sort(lat[k])
		b.ReportMetric(mean(k), p.name+"-ns/call")
		b.ReportMetric(float64(percentile(lat[k], 50).Nanoseconds()), p.name+"-p50-ns")
	}
	b.ReportMetric(mean(1)/mean(0), "pg/embedded")
}

// aiDeployment serves aiEnvelope from the real plugin on its local
// provider; its storage is the host's.
func aiDeployment(tb testing.TB) string {
	return fmt.Sprintf(`
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type = "local"
    }
  }
}
`, binary(tb, "./plugins/aienvelope"))
}

// generatePaths is aiEnvelope.generate as an operator call (host →
// plugin) with a new idempotency key per call, so every call runs the
// local provider and records a new envelope: in SQLite on one host, in
// PostgreSQL on the other.
func generatePaths(tb testing.TB) (embedded, postgres func(int) error) {
	he, hp := startBackendHosts(tb, aiDeployment(tb), "ai")
	ctx := context.Background()
	generate := func(h *host.Host, path string) func(int) error {
		return func(i int) error {
			out, err := h.Call(ctx, "aiEnvelope", "generate", generatePayload(path, i), host.RunOptions{})
			if err != nil {
				return err
			}
			var res struct{ Status string }
			if err := json.Unmarshal(out, &res); err != nil || res.Status != "completed" {
				return fmt.Errorf("generate = %.300s (%v)", out, err)
			}
			return nil
		}
	}
	return generate(he, "embedded"), generate(hp, "postgres")
}

// BenchmarkPostgresAIEnvelopeGenerate times generatePaths.
func BenchmarkPostgresAIEnvelopeGenerate(b *testing.B) {
	embedded, postgres := generatePaths(b)
	timeBackends(b, embedded, postgres)
}

// promptDeployment serves promptLibrary from the real plugin; its store
// is the host's storage (a directory under the state directory, or the
// database).
func promptDeployment(tb testing.TB) string {
	return fmt.Sprintf(`
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
}
`, binary(tb, "./plugins/promptlib"))
}

// publishPrompt publishes raw through h's promptLibrary plugin and returns
// its full pin.
func publishPrompt(ctx context.Context, h *host.Host, raw []byte) (string, error) {
	req, err := json.Marshal(promptlibrary.PublishRequest{Raw: raw})
	if err != nil {
		return "", err
	}
	out, err := h.Call(ctx, promptlibrary.Family, promptlibrary.MethodPublish, req, host.RunOptions{})
	if err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	var res promptlibrary.PublishResult
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("publish result %s: %w", out, err)
	}
	return res.Version.Pin().String(), nil
}

// promptGetPaths is promptLibrary.get of a pinned ~1 KiB prompt as an
// operator call (the host's prompt policy and the plugin), from a file
// store on one host and from PostgreSQL on the other.
func promptGetPaths(tb testing.TB) (embedded, postgres func(int) error) {
	he, hp := startBackendHosts(tb, promptDeployment(tb), "prompts")
	ctx := context.Background()
	raw := benchPrompt("bench/system", 1)
	get := func(h *host.Host) func(int) error {
		pin, err := publishPrompt(ctx, h, raw)
		if err != nil {
			tb.Fatal(err)
		}
		req := json.RawMessage(`{"promptId":"` + pin + `"}`)
		return func(int) error {
			out, err := h.Call(ctx, promptlibrary.Family, promptlibrary.MethodGet, req, host.RunOptions{})
			if err != nil {
				return err
			}
			var p promptlibrary.Prompt
			if err := json.Unmarshal(out, &p); err != nil || p.Raw != string(raw) {
				return fmt.Errorf("get = %.300s (%v)", out, err)
			}
			return nil
		}
	}
	return get(he), get(hp)
}

// BenchmarkPostgresPromptGet times promptGetPaths.
func BenchmarkPostgresPromptGet(b *testing.B) {
	embedded, postgres := promptGetPaths(b)
	timeBackends(b, embedded, postgres)
}

// agentPrompt is the system prompt of the agents of the round-trip
// benchmark.
const agentPrompt = "---\nname: bench/agent\nversion: 1\n---\nYou read your mailbox and answer in one line.\n"

// agentDeployment is the agentRuntime plugin with what its agents think
// with: aiEnvelope on the local provider and promptLibrary.
func agentDeployment(tb testing.TB) string {
	return aiDeployment(tb) + promptDeployment(tb) + fmt.Sprintf(`
capability "agents" {
  plugin = %q
}
`, binary(tb, "./plugins/agentrt"))
}

// agentPair publishes the agents' prompt on h and spawns a sender and a
// recipient from an inline manifest; it returns their instance ids.
func agentPair(ctx context.Context, h *host.Host) (from, to string, err error) {
	if _, err := publishPrompt(ctx, h, []byte(agentPrompt)); err != nil {
		return "", "", err
	}
	ids := make([]string, 2)
	for i := range ids {
		manifest := fmt.Sprintf(`{"id":"bench-%d","name":"Bench %d","description":"reads its mailbox","systemPromptRef":"bench/agent@1","toolAllowlist":[]}`, i, i)
		out, err := h.Call(ctx, agentruntime.Family, agentruntime.MethodSpawn,
			fmt.Appendf(nil, `{"manifest":%s,"idempotencyKey":"bench-spawn-%d"}`, manifest, i), host.RunOptions{})
		if err != nil {
			return "", "", fmt.Errorf("spawn: %w", err)
		}
		var r agentruntime.SpawnResult
		if err := json.Unmarshal(out, &r); err != nil || r.AgentInstanceID == "" {
			return "", "", fmt.Errorf("spawn result %s: %v", out, err)
		}
		ids[i] = r.AgentInstanceID
	}
	return ids[0], ids[1], nil
}

// messageRoundTrip returns one agent message round trip on h: messageSend
// from one agent to the other, then a delegate to the recipient, whose run
// claims the message from its mailbox, takes one turn of aiEnvelope
// generate with it and acknowledges it. The mailbox holds 64 messages, so
// a round trip that left its message unread fails the benchmark within 64
// calls (mailbox_full).
func messageRoundTrip(ctx context.Context, h *host.Host, from, to, path string) func(int) error {
	return func(i int) error {
		send := fmt.Appendf(nil, `{"fromAgentId":%q,"toAgentId":%q,"channel":"bench","content":{"n":%d},"idempotencyKey":"bench-%s-%d"}`,
			from, to, i, path, i)
		if _, err := h.Call(ctx, agentruntime.Family, agentruntime.MethodMessageSend, send, host.RunOptions{}); err != nil {
			return fmt.Errorf("messageSend: %w", err)
		}
		out, err := h.Call(ctx, agentruntime.Family, agentruntime.MethodDelegate,
			fmt.Appendf(nil, `{"task":"Read your mailbox.","agents":[%q]}`, to), host.RunOptions{})
		if err != nil {
			return fmt.Errorf("delegate: %w", err)
		}
		var r agentruntime.DelegateResult
		if err := json.Unmarshal(out, &r); err != nil || r.Status != agentruntime.StatusCompleted {
			return fmt.Errorf("delegate result %s: %v", out, err)
		}
		return nil
	}
}

// agentMessagePaths is an agent message round trip (see
// messageRoundTrip) with the runtime's instances, tasks and mailboxes, and
// the envelopes and prompts its run uses, in SQLite and files on one host
// and in PostgreSQL on the other.
func agentMessagePaths(tb testing.TB) (embedded, postgres func(int) error) {
	he, hp := startBackendHosts(tb, agentDeployment(tb), "ai", "prompts", "agents")
	ctx := context.Background()
	roundTrip := func(h *host.Host, path string) func(int) error {
		from, to, err := agentPair(ctx, h)
		if err != nil {
			tb.Fatal(err)
		}
		return messageRoundTrip(ctx, h, from, to, path)
	}
	return roundTrip(he, "embedded"), roundTrip(hp, "postgres")
}

// BenchmarkPostgresAgentMessage times agentMessagePaths.
func BenchmarkPostgresAgentMessage(b *testing.B) {
	embedded, postgres := agentMessagePaths(b)
	timeBackends(b, embedded, postgres)
}

// executeRequest posts one probe.echo run to base with its own
// Idempotency-Key, so that each request runs the node and writes both a
// run record and an idempotency record, and checks it succeeded.
func executeRequest(client *http.Client, base, key string) error {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/nodes/probe.echo:execute",
		bytes.NewReader([]byte(`{"input":`+payload+`}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var out struct{ Status string }
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Status != "succeeded" {
		return fmt.Errorf("%s: %.300s", res.Status, body)
	}
	return nil
}

// executePaths is POST /v1/nodes/probe.echo:execute on `host serve`, one
// request at a time, each with a new Idempotency-Key: the run record and
// the idempotency record on the embedded backend (files synced under the
// state directory) on one host process, in PostgreSQL on the other.
func executePaths(tb testing.TB) (embedded, postgres func(int) error) {
	dsn := pgtest.DSN(tb)
	be, _ := startServeIn(tb, "", echoDeployment())
	bp, _ := startServeIn(tb, postgresStorage(dsn), echoDeployment())
	client := &http.Client{Timeout: time.Minute}
	tb.Cleanup(client.CloseIdleConnections)
	execute := func(base, path string) func(int) error {
		return func(i int) error {
			// Keys are 22 to 128 characters.
			return executeRequest(client, base, fmt.Sprintf("bench-execute-%s-%d", path, i))
		}
	}
	// The host's own tables are made at its first run.
	if err := executeRequest(client, bp, "bench-execute-setup-postgres"); err != nil {
		tb.Fatal(err)
	}
	requireTables(tb, dsn, config.HostStorageSchema)
	return execute(be, "embedded"), execute(bp, "postgres")
}

// BenchmarkPostgresServeExecute times executePaths.
func BenchmarkPostgresServeExecute(b *testing.B) {
	embedded, postgres := executePaths(b)
	timeBackends(b, embedded, postgres)
}

// TestPostgresBenchSetup makes each PostgreSQL benchmark's calls a few
// times on both backends, so `go test` catches a broken setup without
// running the benchmarks. It skips without a server, as they do.
func TestPostgresBenchSetup(t *testing.T) {
	for name, paths := range map[string]func(testing.TB) (func(int) error, func(int) error){
		"aiEnvelope generate": generatePaths,
		"promptLibrary get":   promptGetPaths,
		"agent message":       agentMessagePaths,
		"POST execute":        executePaths,
	} {
		t.Run(name, func(t *testing.T) {
			embedded, postgres := paths(t)
			for i := range 3 {
				if err := embedded(i); err != nil {
					t.Fatalf("embedded call %d: %v", i, err)
				}
				if err := postgres(i); err != nil {
					t.Fatalf("postgres call %d: %v", i, err)
				}
			}
		})
	}
}
