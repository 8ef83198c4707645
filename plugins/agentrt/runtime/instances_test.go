package runtime

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// instances pages through every instance in spawn order with its mailbox,
// its working tasks and its state, beside the quota and capacity in force.
func TestInstances(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "a.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	settings := DefaultSettings()
	settings.SpawnQuota, settings.MailboxCapacity = 5, 4
	svc := New(st, settings)

	empty, err := svc.Instances(ctx, &agentruntime.InstancesRequest{})
	if err != nil || len(empty.Instances) != 0 || empty.Next != "" || empty.SpawnedCount != 0 || empty.SpawnQuota != 5 || empty.MailboxCapacity != 4 {
		t.Fatalf("instances of an empty store = %+v, %v", empty, err)
	}
	if b, _ := json.Marshal(empty); !strings.Contains(string(b), `"instances":[]`) {
		t.Errorf("empty answer %s, want an empty instances list", b)
	}

	writer := spawn(t, svc, "w", manifest("writer", "Writes prose."))
	analyst := spawn(t, svc, "a", manifest("analyst", "Reads numbers."))
	for _, key := range []string{"m1", "m2"} {
		if _, err := svc.MessageSend(ctx, &agentruntime.MessageSendRequest{FromAgentID: writer, ToAgentID: analyst, Channel: "c", Content: json.RawMessage(`1`), IdempotencyKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StartTask(ctx, "dlg_1", store.KindDelegation, writer, store.TaskWorking, nil); err != nil {
		t.Fatal(err)
	}

	var got []agentruntime.InstanceSummary
	req := &agentruntime.InstancesRequest{Limit: 1}
	for range 3 {
		res, err := svc.Instances(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.SpawnedCount != 2 || res.SpawnQuota != 5 || res.MailboxCapacity != 4 {
			t.Errorf("page after %q: %+v", req.After, res)
		}
		got = append(got, res.Instances...)
		if res.Next == "" {
			break
		}
		req.After = res.Next
	}
	if len(got) != 2 {
		t.Fatalf("listed %+v, want the two instances", got)
	}
	// Spawned in one millisecond or two: the order is by time, then id.
	if got[0].SpawnedAt.After(got[1].SpawnedAt) || got[0].SpawnedAt.Equal(got[1].SpawnedAt) && got[0].AgentInstanceID > got[1].AgentInstanceID {
		t.Errorf("listed %+v, not in spawn order", got)
	}
	byID := map[string]agentruntime.InstanceSummary{got[0].AgentInstanceID: got[0], got[1].AgentInstanceID: got[1]}
	w, a := byID[writer], byID[analyst]
	parsed, _ := agentruntime.ParseManifest(manifest("writer", "Writes prose."))
	digest, _ := parsed.Digest()
	if w.AgentInstanceID != writer || w.ManifestID != "writer" || w.ManifestDigest != digest || w.SpawnedAt.IsZero() ||
		w.State != agentruntime.InstanceWorking || w.Tasks != 1 || w.Mailbox != 0 {
		t.Errorf("writer = %+v", w)
	}
	if a.AgentInstanceID != analyst || a.ManifestID != "analyst" || a.State != agentruntime.InstanceIdle || a.Tasks != 0 || a.Mailbox != 2 {
		t.Errorf("analyst = %+v", a)
	}
}

// A limit out of range and an after that names no instance are
// validation_error naming the member; the store is not read past them.
func TestInstancesRefused(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, filepath.Join(t.TempDir(), "a.db"), DefaultSettings())
	id := spawn(t, svc, "w", manifest("writer", "Writes prose."))
	cases := []struct {
		req     agentruntime.InstancesRequest
		pointer string
	}{
		{agentruntime.InstancesRequest{Limit: -1}, "/limit"},
		{agentruntime.InstancesRequest{Limit: agentruntime.MaxInstancesLimit + 1}, "/limit"},
		{agentruntime.InstancesRequest{After: "agt_nope"}, "/after"},
		{agentruntime.InstancesRequest{After: id + "x"}, "/after"},
		{agentruntime.InstancesRequest{After: id[:len(id)-1]}, "/after"},
	}
	for _, c := range cases {
		res, err := svc.Instances(ctx, &c.req)
		we := wop.AsError(err)
		if err == nil || we.Code != wop.CodeValidation {
			t.Errorf("%+v = %+v, %v; want validation_error", c.req, res, err)
			continue
		}
		var d map[string]string
		if json.Unmarshal(we.Details, &d) != nil || d["pointer"] != c.pointer {
			t.Errorf("%+v: details %s, want pointer %s", c.req, we.Details, c.pointer)
		}
	}
	if res, err := svc.Instances(ctx, &agentruntime.InstancesRequest{Limit: agentruntime.MaxInstancesLimit, After: id}); err != nil || len(res.Instances) != 0 {
		t.Errorf("the largest limit after the last instance = %+v, %v; want an empty page", res, err)
	}
}
