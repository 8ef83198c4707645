package agentruntime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// MethodInstances is the operator's view of the runtime: the agent
// instances it holds, with their mailboxes and the spawn quota in use.
// The host refuses it to every caller but the operator with
// capability_not_declared (docs/contract.md §4.3), so that no pack, plugin
// or agent learns which other agents exist. A runtime may leave it out.
const MethodInstances = "instances"

// CapabilityInstances is the capability named by the errors of instances.
const CapabilityInstances = "host." + Family + "." + MethodInstances

// Page sizes of instances.
const (
	// DefaultInstancesLimit is the page size of a request without limit.
	DefaultInstancesLimit = 100
	// MaxInstancesLimit is the largest limit accepted.
	MaxInstancesLimit = 1000
)

// Instance states. An instance has no life of its own between runs: it is
// working while a delegation or a ballot runs it, and idle otherwise.
const (
	InstanceIdle    = "idle"
	InstanceWorking = "working"
)

// InstancesRequest is the body of instances: a page of the instances in
// spawn order.
type InstancesRequest struct {
	// Limit is the most instances to answer, 1 to MaxInstancesLimit; 0
	// means DefaultInstancesLimit.
	Limit int `json:"limit,omitempty"`
	// After is the Next of the previous page, "" for the first page.
	After string `json:"after,omitempty"`
}

// PageSize returns the number of instances r asks for, or a
// validation_error naming limit when it is out of range.
func (r *InstancesRequest) PageSize() (int, error) {
	switch {
	case r.Limit == 0:
		return DefaultInstancesLimit, nil
	case r.Limit < 0 || r.Limit > MaxInstancesLimit:
		return 0, wop.Errorf(wop.CodeValidation, "limit: %d is out of range: from 1 to %d, or 0 for %d", r.Limit, MaxInstancesLimit, DefaultInstancesLimit).
			WithDetails(map[string]string{"pointer": "/limit"}).WithCapability(CapabilityInstances)
	}
	return r.Limit, nil
}

// InstanceSummary is one agent instance in an instances answer. The pack
// that ships the manifest is the host's to know: its agent registry holds
// ManifestID with ManifestDigest, while an inline manifest has no pack.
type InstanceSummary struct {
	AgentInstanceID string `json:"agentInstanceId"`
	// ManifestID is the id of the manifest the instance runs, and
	// ManifestDigest that manifest's identity.
	ManifestID     string    `json:"manifestId"`
	ManifestDigest string    `json:"manifestDigest"`
	SpawnedAt      time.Time `json:"spawnedAt"`
	// State is InstanceWorking while Tasks > 0, else InstanceIdle.
	State string `json:"state"`
	// Mailbox counts the messages waiting for the instance's next run,
	// those a run has claimed but not yet acknowledged included: what
	// counts against InstancesResult.MailboxCapacity.
	Mailbox int `json:"mailbox"`
	// Tasks counts the delegations and ballots the instance is working on.
	Tasks int `json:"tasks"`
}

// InstancesResult is the answer to instances.
type InstancesResult struct {
	// Instances are in spawn order, oldest first.
	Instances []InstanceSummary `json:"instances"`
	// Next is the After of the next page, "" when this page is the last.
	Next string `json:"next,omitempty"`
	// SpawnQuota bounds the instances of the store, 0 for no bound, and
	// SpawnedCount is how many it holds, every page together.
	SpawnQuota   int `json:"spawnQuota"`
	SpawnedCount int `json:"spawnedCount"`
	// MailboxCapacity bounds the Mailbox of every instance.
	MailboxCapacity int `json:"mailboxCapacity"`
}

// MarshalJSON always writes "instances" as an array, never null, so that
// an empty store answers an empty list.
func (r InstancesResult) MarshalJSON() ([]byte, error) {
	type plain InstancesResult // no MarshalJSON method, so no recursion
	if r.Instances == nil {
		r.Instances = []InstanceSummary{}
	}
	return json.Marshal(plain(r))
}

// Instances returns a page of the runtime's agent instances. Operator
// only: any other caller is refused with capability_not_declared.
func (c *Client) Instances(ctx context.Context, req *InstancesRequest) (*InstancesResult, error) {
	var res InstancesResult
	if err := c.call(ctx, MethodInstances, CapabilityInstances, req, req == nil, &res); err != nil {
		return nil, err
	}
	if res.Instances == nil {
		res.Instances = []InstanceSummary{}
	}
	return &res, nil
}

// StateOf returns the state of an instance working on tasks tasks.
func StateOf(tasks int) string {
	if tasks > 0 {
		return InstanceWorking
	}
	return InstanceIdle
}
