-- Run records: one row per run, its record the bytes the file
-- state_dir/runs/<runId>.json would hold. The host's schema numbers its
-- migrations after those of the idempotency store (hostMigrations).
CREATE TABLE run_records (
    run_id     text        PRIMARY KEY,
    record     bytea       NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX run_records_created_at ON run_records (created_at, run_id);
