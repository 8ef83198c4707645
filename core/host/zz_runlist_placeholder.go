package host

import (
	"context"
	"time"
)

// Placeholder until the run listing lands; removed at merge.

type RunSummary struct {
	RunID          string    `json:"runId"`
	TypeID         string    `json:"typeId"`
	Pack           string    `json:"pack"`
	Outcome        string    `json:"outcome"`
	ErrorCode      string    `json:"errorCode,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
	FinishedAt     time.Time `json:"finishedAt"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	ReplayOf       string    `json:"replayOf,omitempty"`
	Owner          string    `json:"owner,omitempty"`
	Calls          int       `json:"calls"`
}

type RunFilter struct {
	TypeID, Outcome, ErrorCode, IdempotencyKey string
	Since, Until                               time.Time
	Owner                                      string
	AllOwners                                  bool
	Limit                                      int
	After                                      string
}

type RunPage struct {
	Runs []RunSummary
	Next string
}

func (h *Host) ListRuns(ctx context.Context, f RunFilter) (*RunPage, error) { return &RunPage{}, nil }

type StorageInfo struct {
	Backend  string
	Where    string
	Writable bool
	Reason   string
}

func (h *Host) Storage() StorageInfo { return StorageInfo{} }
