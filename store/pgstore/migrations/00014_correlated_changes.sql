-- +goose Up
-- The change log of correlated events, read by the correlated-event feed
-- (GET /api/events/feed and /api/events/subscribe). Every create that
-- records, counts or resolves an event, every status change and every
-- delete writes one row per event changed, in the same transaction as the
-- change. tx is the writing transaction's id and seq a sequence number: a
-- reader reads (tx, seq) in order, only below the oldest running
-- transaction (pg_snapshot_xmin), so a transaction that commits late is
-- never skipped. snapshot is the event after the change (row_to_json of
-- its correlated_events row); the other columns are the ones getEvents'
-- filters read. 00012 and 00013 are the lifecycle feed's.
CREATE SEQUENCE correlated_event_changes_seq;

CREATE TABLE correlated_event_changes (
    tx              xid8    NOT NULL DEFAULT pg_current_xact_id(),
    seq             bigint  NOT NULL DEFAULT nextval('correlated_event_changes_seq'),
    kind            text    NOT NULL,
    event_id        uuid    NOT NULL,
    organization    text    NOT NULL,
    user_id         text    NOT NULL,
    category        text    NOT NULL,
    action          text    NOT NULL,
    severity        text    NOT NULL,
    status          text    NOT NULL,
    resolved        boolean NOT NULL,
    correlation_key text,
    description     text    NOT NULL,
    snapshot        json    NOT NULL
);

ALTER SEQUENCE correlated_event_changes_seq OWNED BY correlated_event_changes.seq;

CREATE UNIQUE INDEX correlated_event_changes_position ON correlated_event_changes (tx, seq);

-- +goose Down
DROP TABLE correlated_event_changes;
