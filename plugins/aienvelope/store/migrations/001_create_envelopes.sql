-- The aiEnvelope store shared by every host: one row per idempotency key.
-- A pending row is owned by the process running it (owner) for as long as
-- that process renews its lease (lease_until); a row whose lease passed is
-- taken over by another host's sweeper (async) or released (sync).
CREATE TABLE envelopes (
    key         text        PRIMARY KEY,
    digest      text        NOT NULL,
    id          text        NOT NULL UNIQUE,
    type        text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('pending', 'completed', 'failed')),
    async       boolean     NOT NULL,
    request     bytea       NOT NULL,
    result      bytea,
    error       bytea,
    created_at  timestamptz NOT NULL,
    finished_at timestamptz,
    owner       text,
    lease_until timestamptz
);

-- The sweepers' scan: pending rows by lease.
CREATE INDEX envelopes_leases ON envelopes (lease_until) WHERE state = 'pending';
-- The prune's scan: finished rows by age.
CREATE INDEX envelopes_finished ON envelopes (finished_at) WHERE state <> 'pending';
