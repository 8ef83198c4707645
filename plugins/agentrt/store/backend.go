package store

import (
	"context"
	"time"
)

// Backend is the runtime's store as the runtime uses it: the embedded
// SQLite store (Store) or the PostgreSQL store (Postgres), which several
// hosts share. Every implementation keeps one spawn quota, deduplicates
// spawns and messages by idempotency key, bounds each mailbox, reads a
// mailbox oldest first and delivers its messages at least once, each
// claimed by one run at a time. Failures wrap the Err values of this
// package.
type Backend interface {
	// CreateInstance records a new instance within quota, or returns the
	// one spawned with the same key (see Store.CreateInstance).
	CreateInstance(ctx context.Context, in NewInstance, quota int) (Instance, bool, error)
	// Instance returns the instance with the given id, or ErrNotFound.
	Instance(ctx context.Context, id string) (Instance, error)
	// LatestInstanceOf returns the id of the most recently spawned
	// instance of a manifest id, or ErrNotFound.
	LatestInstanceOf(ctx context.Context, manifestID string) (string, error)
	// ListInstances returns a page of the instances in spawn order, each
	// with its queued messages and working tasks (see
	// Store.ListInstances).
	ListInstances(ctx context.Context, after string, limit int) (InstancePage, error)

	// StartTask records a task in the given status.
	StartTask(ctx context.Context, id, kind, instanceID, status string, input []byte) error
	// FinishTask sets the final status of a task with its output or error.
	FinishTask(ctx context.Context, id, status string, output, errJSON []byte) error
	// Task returns the task with the given id, or ErrNotFound.
	Task(ctx context.Context, id string) (Task, error)
	// InFlight returns the working tasks plus queued messages of each id.
	InFlight(ctx context.Context, ids []string) (map[string]int, error)

	// Enqueue accepts a message into a mailbox of at most capacity queued
	// messages, or returns the one sent with the same key (see
	// Store.Enqueue).
	Enqueue(ctx context.Context, m NewMessage, capacity int) (Message, bool, error)
	// Claim takes up to max unclaimed messages of a mailbox, oldest
	// first, and holds them for lease.
	Claim(ctx context.Context, to string, max int, lease time.Duration) ([]Message, error)
	// Ack marks claimed messages delivered.
	Ack(ctx context.Context, ids []string) error
	// Release returns claimed messages to their mailbox.
	Release(ctx context.Context, ids []string) error
	// Queued returns the number of messages waiting in a mailbox.
	Queued(ctx context.Context, to string) (int, error)

	// Close releases what the store holds open.
	Close() error
}

var (
	_ Backend = (*Store)(nil)
	_ Backend = (*Postgres)(nil)
)
