package agentruntime

import "time"

const MethodInstances = "instances"

type InstancesRequest struct {
	Limit int    `json:"limit,omitempty"`
	After string `json:"after,omitempty"`
}
type InstanceSummary struct {
	AgentInstanceID string    `json:"agentInstanceId"`
	ManifestID      string    `json:"manifestId"`
	ManifestDigest  string    `json:"manifestDigest"`
	SpawnedAt       time.Time `json:"spawnedAt"`
	State           string    `json:"state"`
	Mailbox         int       `json:"mailbox"`
	Tasks           int       `json:"tasks"`
}
type InstancesResult struct {
	Instances       []InstanceSummary `json:"instances"`
	Next            string            `json:"next,omitempty"`
	SpawnQuota      int               `json:"spawnQuota"`
	SpawnedCount    int               `json:"spawnedCount"`
	MailboxCapacity int               `json:"mailboxCapacity"`
}
