-- Agent instances, tasks and mailboxes, shared by every host. Times are
-- Unix milliseconds, as the embedded store keeps them.

CREATE TABLE instances (
    -- seq orders instances spawned in the same millisecond.
    seq             bigserial NOT NULL,
    id              text PRIMARY KEY,
    manifest_id     text NOT NULL,
    manifest_digest text NOT NULL,
    manifest        bytea NOT NULL,
    config          bytea,
    -- One instance per spawn key, whichever host spawns it.
    idempotency_key text NOT NULL UNIQUE,
    request_digest  text NOT NULL,
    spawned_at      bigint NOT NULL
);
CREATE INDEX instances_manifest ON instances (manifest_id, spawned_at DESC, seq DESC);

CREATE TABLE tasks (
    id          text PRIMARY KEY,
    kind        text NOT NULL,
    instance_id text NOT NULL REFERENCES instances (id),
    status      text NOT NULL,
    input       bytea,
    output      bytea,
    error       bytea,
    -- owner is the store (one per host process) running the task; a task
    -- whose owner is gone is interrupted.
    owner       text NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);
CREATE INDEX tasks_instance_status ON tasks (instance_id, status);
CREATE INDEX tasks_working_owner ON tasks (owner) WHERE status = 'working';

CREATE TABLE messages (
    seq             bigserial PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    to_instance     text NOT NULL REFERENCES instances (id),
    from_agent      text NOT NULL,
    channel         text NOT NULL,
    content         bytea NOT NULL,
    idempotency_key text NOT NULL,
    request_digest  text NOT NULL,
    sent_at         bigint NOT NULL,
    state           text NOT NULL,
    -- A queued message is claimed while claimed_until is in the future,
    -- by the store named in claimed_by.
    claimed_until   bigint,
    claimed_by      text,
    attempts        integer NOT NULL DEFAULT 0,
    delivered_at    bigint,
    -- One message per key and mailbox, whichever host accepts it.
    UNIQUE (to_instance, idempotency_key)
);
CREATE INDEX messages_mailbox ON messages (to_instance, state, seq);
