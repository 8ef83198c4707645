-- The fields of a run record that a listing filters and orders by, kept
-- beside its bytes so that ListRuns filters and pages in SQL. The host
-- fills them as it writes a record (pgRunRecords.put).
--
-- run_record_fields reads them from a record's bytes. Bytes that are no
-- run record (not UTF-8, not JSON, no typeId, no outcome of a run) give an
-- unreadable record: outcome 'unreadable', started_at the row's
-- created_at, so that it is listed in its place, and the rest null. Each
-- row is read in its own exception block: one bad row neither fails the
-- migration nor a write.
ALTER TABLE run_records
    ADD COLUMN type_id         text,
    ADD COLUMN pack            text,
    ADD COLUMN outcome         text,
    ADD COLUMN error_code      text,
    ADD COLUMN idempotency_key text,
    ADD COLUMN owner           text NOT NULL DEFAULT '',
    ADD COLUMN started_at      timestamptz,
    ADD COLUMN finished_at     timestamptz,
    ADD COLUMN replay_of       text,
    ADD COLUMN calls           integer;

CREATE FUNCTION run_record_fields(raw bytea, stored_at timestamptz,
    OUT type_id text, OUT pack text, OUT outcome text, OUT error_code text, OUT idempotency_key text,
    OUT owner text, OUT started_at timestamptz, OUT finished_at timestamptz, OUT replay_of text, OUT calls integer)
LANGUAGE plpgsql AS $$
DECLARE
    rec jsonb;
BEGIN
    owner := '';
    BEGIN
        rec := convert_from(raw, 'UTF8')::jsonb;
        -- A time is RFC 3339, as the host writes it: PostgreSQL's own
        -- words for times ('now', 'epoch') are no record's.
        IF jsonb_typeof(rec) = 'object' AND rec->>'typeId' <> '' AND rec->>'outcome' IN ('succeeded', 'failed')
            AND rec->>'startedAt' ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' AND rec->>'finishedAt' ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' THEN
            type_id := rec->>'typeId';
            pack := rec->>'pack';
            outcome := rec->>'outcome';
            IF outcome = 'failed' THEN
                error_code := rec->'error'->>'code';
            END IF;
            idempotency_key := NULLIF(rec->>'idempotencyKey', '');
            owner := COALESCE(rec->>'owner', '');
            started_at := (rec->>'startedAt')::timestamptz;
            finished_at := (rec->>'finishedAt')::timestamptz;
            replay_of := NULLIF(rec->>'replayOf', '');
            calls := COALESCE(jsonb_array_length(rec->'invocations'->'calls'), 0);
        END IF;
    EXCEPTION WHEN others THEN
        type_id := NULL; pack := NULL; outcome := NULL; error_code := NULL; idempotency_key := NULL;
        owner := ''; started_at := NULL; finished_at := NULL; replay_of := NULL; calls := NULL;
    END;
    IF outcome IS NULL OR started_at IS NULL THEN
        type_id := NULL; pack := NULL; error_code := NULL; idempotency_key := NULL;
        owner := ''; finished_at := NULL; replay_of := NULL; calls := NULL;
        outcome := 'unreadable';
        started_at := stored_at;
    END IF;
END
$$;

UPDATE run_records r SET (type_id, pack, outcome, error_code, idempotency_key, owner, started_at, finished_at, replay_of, calls) =
    (SELECT * FROM run_record_fields(r.record, r.created_at));

-- A row written without the fields (by put, from bytes that are no run
-- record, or by a host that predates them) gets them from its bytes.
-- The trigger runs with the schema's search path whoever inserts.
CREATE FUNCTION run_records_fill() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.outcome IS NULL OR NEW.started_at IS NULL THEN
        SELECT * INTO NEW.type_id, NEW.pack, NEW.outcome, NEW.error_code, NEW.idempotency_key, NEW.owner,
            NEW.started_at, NEW.finished_at, NEW.replay_of, NEW.calls
        FROM run_record_fields(NEW.record, NEW.created_at);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER run_records_fill BEFORE INSERT ON run_records
    FOR EACH ROW EXECUTE FUNCTION run_records_fill();

ALTER TABLE run_records
    ALTER COLUMN outcome SET NOT NULL,
    ALTER COLUMN started_at SET NOT NULL;

CREATE INDEX run_records_listing ON run_records (started_at DESC, run_id DESC);
