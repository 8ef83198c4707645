package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Message states. A queued message waits in its mailbox (possibly claimed
// by a run that is reading it); a delivered one has been consumed and is
// kept only so that a resent key is still recognised.
const (
	stateQueued    = "queued"
	stateDelivered = "delivered"
)

// Message is one message in a mailbox.
type Message struct {
	// Seq orders the messages of the whole store; a mailbox is read in
	// Seq order, which keeps every sender's messages in the order they
	// were accepted.
	Seq            int64
	ID             string
	To             string
	From           string
	Channel        string
	Content        []byte
	IdempotencyKey string
	SentAt         time.Time
	// Attempts counts the claims of the message: more than one means it
	// is being delivered again after a run that did not acknowledge it.
	Attempts int
}

// NewMessage is what Enqueue records.
type NewMessage struct {
	To, From, Channel string
	Content           []byte
	IdempotencyKey    string
	// RequestDigest is a digest of the request's content, so that a key
	// reused for a different message is recognised.
	RequestDigest string
}

// Enqueue accepts a message into the mailbox of m.To. When the mailbox
// already holds a message with the same idempotency key (queued or
// delivered), that message is returned with duplicate true and nothing is
// added, or ErrIdempotencyMismatch when its request digest differs. A
// mailbox holding capacity queued messages refuses a new one with
// ErrMailboxFull. The recipient must exist (ErrNotFound otherwise). Once
// Enqueue returns, the message is on disk.
func (s *Store) Enqueue(ctx context.Context, m NewMessage, capacity int) (msg Message, duplicate bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM instances WHERE id = ?`, m.To).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("recipient %q: %w", m.To, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("look up recipient %q: %w", m.To, err)
		}
		var digest string
		row := tx.QueryRowContext(ctx, messageSelect+`, request_digest FROM messages WHERE to_instance = ? AND idempotency_key = ?`, m.To, m.IdempotencyKey)
		existing, err := scanMessage(row, &digest)
		switch {
		case err == nil:
			if digest != m.RequestDigest {
				return fmt.Errorf("message key %q to %s: %w", m.IdempotencyKey, m.To, ErrIdempotencyMismatch)
			}
			msg, duplicate = existing, true
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("look up message key: %w", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE to_instance = ? AND state = ?`, m.To, stateQueued).Scan(&n); err != nil {
			return fmt.Errorf("count mailbox of %s: %w", m.To, err)
		}
		if capacity > 0 && n >= capacity {
			return fmt.Errorf("mailbox of %s holds %d messages, its capacity: %w", m.To, n, ErrMailboxFull)
		}
		msg = Message{
			ID: NewID("msg_"), To: m.To, From: m.From, Channel: m.Channel, Content: m.Content,
			IdempotencyKey: m.IdempotencyKey, SentAt: fromMillis(s.now().UnixMilli()),
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO messages
			(id, to_instance, from_agent, channel, content, idempotency_key, request_digest, sent_at, state)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			msg.ID, msg.To, msg.From, msg.Channel, msg.Content, msg.IdempotencyKey, m.RequestDigest, msg.SentAt.UnixMilli(), stateQueued)
		if err != nil {
			return fmt.Errorf("insert message: %w", err)
		}
		msg.Seq, err = res.LastInsertId()
		return err
	})
	return msg, duplicate, err
}

// Claim takes up to max queued messages of the mailbox of to, oldest
// first, that no other run holds, and holds them for lease. A claimed
// message that is neither acknowledged nor released before its lease ends,
// or whose process dies, is claimed again later: delivery is at least
// once. max <= 0 claims every available message.
func (s *Store) Claim(ctx context.Context, to string, max int, lease time.Duration) ([]Message, error) {
	var out []Message
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.now().UnixMilli()
		limit := -1
		if max > 0 {
			limit = max
		}
		rows, err := tx.QueryContext(ctx, messageSelect+` FROM messages
			WHERE to_instance = ? AND state = ? AND (claimed_until IS NULL OR claimed_until <= ?)
			ORDER BY seq LIMIT ?`, to, stateQueued, now, limit)
		if err != nil {
			return fmt.Errorf("read mailbox of %s: %w", to, err)
		}
		for rows.Next() {
			m, err := scanMessageRows(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read mailbox of %s: %w", to, err)
		}
		until := now + lease.Milliseconds()
		for i := range out {
			out[i].Attempts++
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET claimed_until = ?, attempts = attempts + 1 WHERE seq = ?`, until, out[i].Seq); err != nil {
				return fmt.Errorf("claim message %s: %w", out[i].ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Ack marks claimed messages delivered: they leave the mailbox and no
// longer count against its capacity. Their keys stay recorded.
func (s *Store) Ack(ctx context.Context, ids []string) error {
	return s.setState(ctx, ids, `UPDATE messages SET state = ?, claimed_until = NULL, delivered_at = ? WHERE state = ? AND id IN `, stateDelivered)
}

// Release returns claimed messages to their mailbox at once, for a run
// that failed before it could consume them.
func (s *Store) Release(ctx context.Context, ids []string) error {
	return s.setState(ctx, ids, `UPDATE messages SET state = ?, claimed_until = NULL, delivered_at = ? WHERE state = ? AND id IN `, stateQueued)
}

func (s *Store) setState(ctx context.Context, ids []string, stmt, state string) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{state, nil, stateQueued}
	if state == stateDelivered {
		args[1] = s.now().UnixMilli()
	}
	for _, id := range ids {
		args = append(args, id)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	if _, err := s.db.ExecContext(ctx, stmt+in, args...); err != nil {
		return fmt.Errorf("set %d messages %s: %w", len(ids), state, err)
	}
	return nil
}

// Queued returns the number of messages waiting in the mailbox of to.
func (s *Store) Queued(ctx context.Context, to string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE to_instance = ? AND state = ?`, to, stateQueued).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count mailbox of %s: %w", to, err)
	}
	return n, nil
}

const messageSelect = `SELECT seq, id, to_instance, from_agent, channel, content, idempotency_key, sent_at, attempts`

func scanMessage(row *sql.Row, requestDigest *string) (Message, error) {
	var m Message
	var sent int64
	err := row.Scan(&m.Seq, &m.ID, &m.To, &m.From, &m.Channel, &m.Content, &m.IdempotencyKey, &sent, &m.Attempts, requestDigest)
	if err != nil {
		return Message{}, err
	}
	m.SentAt = fromMillis(sent)
	return m, nil
}

func scanMessageRows(rows *sql.Rows) (Message, error) {
	var m Message
	var sent int64
	if err := rows.Scan(&m.Seq, &m.ID, &m.To, &m.From, &m.Channel, &m.Content, &m.IdempotencyKey, &sent, &m.Attempts); err != nil {
		return Message{}, fmt.Errorf("read message: %w", err)
	}
	m.SentAt = fromMillis(sent)
	return m, nil
}
