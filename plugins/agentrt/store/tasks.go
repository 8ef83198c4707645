package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Task statuses. A task is working until it finishes; a task a previous
// process left working is interrupted when the store is opened again.
const (
	TaskWorking     = "working"
	TaskCompleted   = "completed"
	TaskFailed      = "failed"
	TaskEscalated   = "escalated"
	TaskInterrupted = "interrupted"
)

// Task kinds.
const (
	KindDelegation = "delegation"
	KindBallot     = "ballot"
)

// Task is one unit of work given to an instance.
type Task struct {
	ID         string
	Kind       string
	InstanceID string
	Status     string
	Input      []byte
	Output     []byte
	// Error is the wop error envelope as JSON when the task failed.
	Error     []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// StartTask records a task in the given status (TaskWorking for one that
// is about to run, TaskEscalated for one that will not).
func (s *Store) StartTask(ctx context.Context, id, kind, instanceID, status string, input []byte) error {
	now := s.now().UnixMilli()
	_, err := s.db.ExecContext(ctx, `INSERT INTO tasks (id, kind, instance_id, status, input, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, id, kind, instanceID, status, nullBytes(input), now, now)
	if err != nil {
		return fmt.Errorf("record task %s: %w", id, err)
	}
	return nil
}

// FinishTask sets the final status of a task with its output or error.
func (s *Store) FinishTask(ctx context.Context, id, status string, output, errJSON []byte) error {
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = ?, output = ?, error = ?, updated_at = ? WHERE id = ?`,
		status, nullBytes(output), nullBytes(errJSON), s.now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("finish task %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish task %s: %w", id, ErrNotFound)
	}
	return nil
}

// Task returns the task with the given id, or ErrNotFound.
func (s *Store) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	var created, updated int64
	err := s.db.QueryRowContext(ctx, `SELECT id, kind, instance_id, status, input, output, error, created_at, updated_at
		FROM tasks WHERE id = ?`, id).Scan(&t.ID, &t.Kind, &t.InstanceID, &t.Status, &t.Input, &t.Output, &t.Error, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task %q: %w", id, err)
	}
	t.CreatedAt, t.UpdatedAt = fromMillis(created), fromMillis(updated)
	return t, nil
}

// InFlight returns, for each instance id given, its work in flight: the
// tasks it is working on plus the messages waiting in its mailbox. Ids
// with no work map to 0.
func (s *Store) InFlight(ctx context.Context, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, 0, 2*len(ids)+2)
	for _, id := range ids {
		out[id] = 0
		args = append(args, id)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	args = append(args, TaskWorking)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, stateQueued)
	rows, err := s.db.QueryContext(ctx, `
		SELECT instance_id, COUNT(*) FROM tasks WHERE instance_id IN `+in+` AND status = ? GROUP BY instance_id
		UNION ALL
		SELECT to_instance, COUNT(*) FROM messages WHERE to_instance IN `+in+` AND state = ? GROUP BY to_instance`, args...)
	if err != nil {
		return nil, fmt.Errorf("count work in flight: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count work in flight: %w", err)
		}
		out[id] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count work in flight: %w", err)
	}
	return out, nil
}
