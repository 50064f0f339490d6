-- +goose NO TRANSACTION
-- +goose Up
-- events becomes a table partitioned by range on "timestamp", one partition
-- per UTC month, named events_YYYY_MM, bounds exactly YYYY-MM-01
-- 00:00:00+00 whatever the server's TimeZone (every bound below is
-- computed on timestamp without time zone in UTC and written with an
-- explicit +00). There is never a DEFAULT partition: once one holds a row,
-- creating that row's month fails, and DETACH CONCURRENTLY is refused while
-- one exists. pgstore makes the partitions of the next months ahead
-- (DB.KeepPartitionsAhead, hourly in tallyd) and the partition of a month a
-- batch needs on demand (docs/operations.md, Partitions).
--
-- The primary key stays (event_id, timestamp): it holds the partition
-- column, as PostgreSQL requires of a unique constraint on a partitioned
-- table, and a duplicate always lands in the partition of its timestamp, so
-- ON CONFLICT (event_id, timestamp) and the probe still find it.
--
-- An existing table is not copied: it is attached as the partition
-- events_legacy FOR VALUES FROM (MINVALUE) TO (the start of the month after
-- both its newest event and now). Three statements, as goose runs a NO
-- TRANSACTION file one statement at a time:
--
--   1. a CHECK ("timestamp" < that bound) NOT VALID: a catalogue change,
--      enforced on new rows from then on;
--   2. VALIDATE CONSTRAINT: one scan of the table under SHARE UPDATE
--      EXCLUSIVE, which ingestion does not wait for;
--   3. one short transaction (lock_timeout 10s): rename the table and its
--      indexes to events_legacy*, create the partitioned events with the
--      same columns, defaults and indexes (the sequence moves to it), and
--      attach events_legacy; the validated CHECK spares the attach its
--      scan, and its indexes are attached to the parent's, not rebuilt.
--
-- A rerun after a failure between statements finishes the work (each step
-- checks what is done). An empty table (a new database) is replaced, with
-- no events_legacy. With timescaledb's hypertable (00001), events is left
-- as it is: timescaledb partitions it, and pgstore's partition upkeep does
-- nothing on an unpartitioned events table.

-- +goose StatementBegin
DO $$
DECLARE
    newest timestamptz;
    bound  timestamp;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('events')) <> 'r'
       OR EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'events_legacy_range' AND conrelid = to_regclass('events'))
       OR EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') THEN
        RETURN;
    END IF;
    SELECT max("timestamp") INTO newest FROM events;
    IF newest IS NULL THEN
        RETURN;
    END IF;
    bound := date_trunc('month', greatest(newest, now()) AT TIME ZONE 'UTC') + interval '1 month';
    EXECUTE format('ALTER TABLE events ADD CONSTRAINT events_legacy_range CHECK ("timestamp" < %L) NOT VALID',
                   to_char(bound, 'YYYY-MM-DD HH24:MI:SS') || '+00');
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'events_legacy_range'
               AND conrelid = to_regclass('events') AND NOT convalidated) THEN
        ALTER TABLE events VALIDATE CONSTRAINT events_legacy_range;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    def   text;
    bound timestamp;
    month timestamp;
    last  timestamp;
    ix    record;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('events')) <> 'r'
       OR EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') THEN
        RETURN;
    END IF;
    SET LOCAL lock_timeout = '10s';
    LOCK TABLE events IN ACCESS EXCLUSIVE MODE;

    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conname = 'events_legacy_range' AND conrelid = to_regclass('events');
    IF def IS NOT NULL THEN
        bound := substring(def FROM '''([^'']+)''')::timestamptz AT TIME ZONE 'UTC';
    ELSIF EXISTS (SELECT 1 FROM events) THEN
        -- rows arrived after the first statement found the table empty:
        -- the attach below scans them (they are few).
        SELECT date_trunc('month', greatest(max("timestamp"), now()) AT TIME ZONE 'UTC') + interval '1 month'
        INTO bound FROM events;
    END IF;

    ALTER TABLE events RENAME TO events_legacy;
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = to_regclass('events_legacy') LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.relname,
                       'events_legacy_' || regexp_replace(ix.relname, '^(idx_)?events_', ''));
    END LOOP;

    CREATE TABLE events (
        event_id      text        NOT NULL,
        timestamp     timestamptz NOT NULL,
        event_type    text        NOT NULL,
        platform      text        NOT NULL,
        cloud         text        NOT NULL,
        resource_type text        NOT NULL,
        resource_id   text        NOT NULL,
        project_id    text        NOT NULL,
        source        text        NOT NULL,
        payload       json        NOT NULL,
        category      text        NOT NULL,
        received_at   timestamptz NOT NULL,
        tx            xid8        DEFAULT pg_current_xact_id(),
        seq           bigint      DEFAULT nextval('events_feed_seq'),
        late          boolean     NOT NULL DEFAULT false,
        PRIMARY KEY (event_id, timestamp)
    ) PARTITION BY RANGE (timestamp);
    ALTER SEQUENCE events_feed_seq OWNED BY events.seq;

    -- The indexes of 00001, 00011 and 00013, under their names.
    CREATE INDEX idx_events_resource ON events (cloud, resource_type, resource_id, timestamp);
    CREATE INDEX idx_events_time ON events (timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_project ON events (project_id, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_type ON events (event_type, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_resource_id ON events (resource_id, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_feed ON events (tx, seq);
    CREATE INDEX idx_events_feed_legacy ON events (timestamp, event_id COLLATE "C") WHERE tx IS NULL;

    IF bound IS NULL THEN
        DROP TABLE events_legacy;
        month := date_trunc('month', now() AT TIME ZONE 'UTC');
    ELSE
        EXECUTE format('ALTER TABLE events ATTACH PARTITION events_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                       to_char(bound, 'YYYY-MM-DD HH24:MI:SS') || '+00');
        ALTER TABLE events_legacy DROP CONSTRAINT IF EXISTS events_legacy_range;
        month := bound;
    END IF;

    -- The current month and the three after it (pgstore's
    -- DefaultPartitionsAhead), from the first month no partition holds.
    last := date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months';
    WHILE month <= last LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                       'events_' || to_char(month, 'YYYY_MM'),
                       to_char(month, 'YYYY-MM-DD HH24:MI:SS') || '+00',
                       to_char(month + interval '1 month', 'YYYY-MM-DD HH24:MI:SS') || '+00');
        month := month + interval '1 month';
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Retention (pgstore DB.Retention, tallyd retention; docs/operations.md,
-- Retention). events_horizon holds, in its one row, the horizon: events
-- before it are no longer kept, and a late one is refused as a dead
-- letter (reason "retention: …"). resource_checkpoints holds, for every
-- resource with events before a horizon, the projection row those events
-- fold to (columns as current_resources'), at that horizon (at): a fold of
-- the resource's history starts from it and reads only its events from at
-- on, so the projection rebuild and late events answer exactly as before
-- the old partitions were dropped.
-- partitions_dropped and events_dropped count what every run dropped
-- (tally_retention_*_dropped_total).
CREATE TABLE IF NOT EXISTS events_horizon (
    one                boolean     PRIMARY KEY DEFAULT true CHECK (one),
    horizon            timestamptz NOT NULL,
    partitions_dropped bigint      NOT NULL DEFAULT 0,
    events_dropped     bigint      NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS resource_checkpoints (
    cloud           text        NOT NULL,
    resource_type   text        NOT NULL,
    resource_id     text        NOT NULL,
    at              timestamptz NOT NULL,
    platform        text        NOT NULL,
    project_id      text        NOT NULL,
    state           text        NOT NULL,
    size            json,
    created_at      timestamptz,
    deleted_at      timestamptz,
    first_event_at  timestamptz NOT NULL,
    last_event_at   timestamptz NOT NULL,
    last_event_type text        NOT NULL,
    last_event_id   text        NOT NULL,
    PRIMARY KEY (cloud, resource_type, resource_id)
);

-- The purges of retention read these in bounded batches by their time.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_correlated_events_deleted ON correlated_events (deleted_at) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idx_correlated_events_deleted;
DROP TABLE IF EXISTS resource_checkpoints;
DROP TABLE IF EXISTS events_horizon;
-- Back to one plain table: the rows are copied (a rollback is for a
-- development database, not for a live one).
-- +goose StatementBegin
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('events')) <> 'p' THEN
        RETURN;
    END IF;
    CREATE TABLE events_plain (LIKE events INCLUDING DEFAULTS);
    INSERT INTO events_plain SELECT * FROM events;
    ALTER SEQUENCE events_feed_seq OWNED BY events_plain.seq;
    DROP TABLE events;
    ALTER TABLE events_plain RENAME TO events;
    ALTER TABLE events ADD PRIMARY KEY (event_id, timestamp);
    CREATE INDEX idx_events_resource ON events (cloud, resource_type, resource_id, timestamp);
    CREATE INDEX idx_events_time ON events (timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_project ON events (project_id, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_type ON events (event_type, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_resource_id ON events (resource_id, timestamp, event_id COLLATE "C");
    CREATE INDEX idx_events_feed ON events (tx, seq);
    CREATE INDEX idx_events_feed_legacy ON events (timestamp, event_id COLLATE "C") WHERE tx IS NULL;
END
$$;
-- +goose StatementEnd
