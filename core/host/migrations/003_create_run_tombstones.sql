-- Tombstones of pruned run records: the run id and when retention pruned
-- its record, so that a replay of it is refused with run_expired rather
-- than not_found. Pruning deletes a record and writes its tombstone in one
-- statement, and bounds the tombstones as it bounds the records.
CREATE TABLE run_tombstones (
    run_id    text        PRIMARY KEY,
    pruned_at timestamptz NOT NULL
);

CREATE INDEX run_tombstones_pruned_at ON run_tombstones (pruned_at, run_id);
