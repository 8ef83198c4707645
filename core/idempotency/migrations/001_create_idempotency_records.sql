-- Idempotency records: one row per key identity. The record itself is
-- kept as the JSON bytes the file store would write; state, owner and the
-- two times are columns so that Claim, Complete, Release and Prune decide
-- in one statement whether a row is live and whose it is.
CREATE TABLE idempotency_records (
    id           text        PRIMARY KEY,
    state        text        NOT NULL CHECK (state IN ('pending', 'done')),
    owner        text        NOT NULL,
    lease_until  timestamptz NOT NULL,
    completed_at timestamptz,
    record       bytea       NOT NULL
);
