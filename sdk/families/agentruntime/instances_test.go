package agentruntime

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// instances is the operator's alone: a pack, a plugin or an agent calling
// it is refused, the other methods are not.
func TestInstancesIsOperatorOnly(t *testing.T) {
	r := Rules()
	if len(r.OperatorOnly) != 1 || r.OperatorOnly[0] != MethodInstances {
		t.Fatalf("operator-only methods %v, want [%s]", r.OperatorOnly, MethodInstances)
	}
	if len(r.Facets) != 0 {
		t.Errorf("facet rules %v, want none", r.Facets)
	}
}

// A limit of 0 takes the default; 1 and the maximum are accepted; below 1
// and the maximum plus one are validation_error naming limit.
func TestInstancesPageSize(t *testing.T) {
	for limit, want := range map[int]int{0: DefaultInstancesLimit, 1: 1, MaxInstancesLimit: MaxInstancesLimit} {
		got, err := (&InstancesRequest{Limit: limit}).PageSize()
		if err != nil || got != want {
			t.Errorf("limit %d: %d, %v; want %d", limit, got, err, want)
		}
	}
	for _, limit := range []int{-1, MaxInstancesLimit + 1} {
		_, err := (&InstancesRequest{Limit: limit}).PageSize()
		we := wop.AsError(err)
		if err == nil || we.Code != wop.CodeValidation || we.Capability != CapabilityInstances {
			t.Errorf("limit %d: %v, want validation_error of %s", limit, err, CapabilityInstances)
			continue
		}
		var d map[string]string
		if json.Unmarshal(we.Details, &d) != nil || d["pointer"] != "/limit" {
			t.Errorf("limit %d: details %s, want pointer /limit", limit, we.Details)
		}
	}
}

func TestInstancesResult(t *testing.T) {
	f := &fakeCaller{answer: `{"instances":[{"agentInstanceId":"agt_a","manifestId":"writer","manifestDigest":"sha256:ab",
		"spawnedAt":"2026-11-29T10:00:00Z","state":"working","mailbox":2,"tasks":1}],
		"next":"agt_a","spawnQuota":8,"spawnedCount":3,"mailboxCapacity":4}`}
	res, err := NewClient(f, nil).Instances(context.Background(), &InstancesRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := InstanceSummary{AgentInstanceID: "agt_a", ManifestID: "writer", ManifestDigest: "sha256:ab",
		SpawnedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), State: InstanceWorking, Mailbox: 2, Tasks: 1}
	if len(res.Instances) != 1 || res.Instances[0] != want {
		t.Errorf("instances = %+v, want [%+v]", res.Instances, want)
	}
	if res.Next != "agt_a" || res.SpawnQuota != 8 || res.SpawnedCount != 3 || res.MailboxCapacity != 4 {
		t.Errorf("result = %+v", res)
	}

	// An answer without instances is an empty list, not nil.
	f = &fakeCaller{answer: `{"spawnQuota":0,"spawnedCount":0,"mailboxCapacity":4}`}
	res, err = NewClient(f, nil).Instances(context.Background(), &InstancesRequest{})
	if err != nil || res.Instances == nil || len(res.Instances) != 0 {
		t.Errorf("empty answer = %+v, %v; want an empty list", res, err)
	}
}

// An empty page is written as an empty list, and the last page without
// next.
func TestInstancesResultMarshal(t *testing.T) {
	b, err := json.Marshal(&InstancesResult{MailboxCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"instances":[],"spawnQuota":0,"spawnedCount":0,"mailboxCapacity":4}`; string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestStateOf(t *testing.T) {
	for tasks, want := range map[int]string{0: InstanceIdle, 1: InstanceWorking, 3: InstanceWorking} {
		if got := StateOf(tasks); got != want {
			t.Errorf("StateOf(%d) = %q, want %q", tasks, got, want)
		}
	}
}
