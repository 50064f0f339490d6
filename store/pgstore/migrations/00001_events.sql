-- +goose Up
-- events is the single source of truth (canonical-event.md, Members and
-- Rules): one row per (event_id, timestamp), the pair that makes a duplicate.
--
-- payload is of type json, not jsonb, on purpose. json keeps an exact copy of
-- the text it was given, so a stored payload reads back byte for byte: numbers
-- such as 12345678901234567890 or 0.1 keep their spelling, members keep their
-- order and unknown members survive, as the spec's "byte-faithful to what the
-- provider sent" and DECISIONS.md ("Numbers in payload: exact") require. jsonb
-- would normalise all of that. json still checks that the text is JSON, and
-- the ->/->> operators work on it; no index needs the payload's content.
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
    PRIMARY KEY (event_id, timestamp)
);

CREATE INDEX idx_events_resource ON events (cloud, resource_type, resource_id, timestamp);
CREATE INDEX idx_events_project ON events (project_id, timestamp);
CREATE INDEX idx_events_type ON events (event_type, timestamp);

-- With the timescaledb extension installed in this database, events becomes a
-- hypertable partitioned on timestamp (the primary key holds the partition
-- column, as timescaledb requires). Without it, events stays a plain table:
-- plain PostgreSQL 15 is enough. The hypertable branch is not exercised by
-- the test suite (the test server has no timescaledb).
-- +goose StatementBegin
DO $$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'timescaledb';
    IF ext_schema IS NOT NULL THEN
        EXECUTE format('SELECT %I.create_hypertable(%L::regclass, %L, if_not_exists => TRUE)',
                       ext_schema, format('%I.events', current_schema()), 'timestamp');
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE events;
