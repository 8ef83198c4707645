package agentruntime

import "time"

const MethodInstances = "instances"

type InstancesRequest struct {
	Limit int    `json:"limit,omitempty"`
	After string `json:"after,omitempty"`
}
type InstanceSummary struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agentId"`
	Pack      string    `json:"pack,omitempty"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	Mailbox   int       `json:"mailbox"`
	Tasks     int       `json:"tasks"`
}
type InstancesResult struct {
	Instances       []InstanceSummary `json:"instances"`
	Next            string            `json:"next,omitempty"`
	SpawnQuota      int               `json:"spawnQuota"`
	SpawnedCount    int               `json:"spawnedCount"`
	MailboxCapacity int               `json:"mailboxCapacity"`
}
