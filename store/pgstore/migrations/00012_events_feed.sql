-- +goose Up
-- The lifecycle feed (GET /api/v1/events/feed, ingest.Store.Feed): every
-- stored event once, in one order that every reader and replica shares,
-- never skipping an event whose transaction commits late.
--
-- A sequence alone cannot give that: transaction A takes seq 1 and stays
-- open, B takes seq 2 and commits, a reader polling seq > 0 sees 2 and moves
-- on, and A's event is lost to it when A commits. So each row also records
-- its writing transaction's id (tx, pg_current_xact_id()), and the feed is
-- ordered by (tx, seq) and read only below pg_snapshot_xmin of the reader's
-- snapshot: every transaction with a smaller id has finished, so no row can
-- appear there later. The feed lags by the longest open writing transaction
-- (docs/operations.md, Change feeds).
--
-- late records whether the event's timestamp was before its resource's
-- last_event_at when it was stored (the feed's "late").
--
-- The new columns have no stored default for existing rows, so this is a
-- catalogue change, not a rewrite of the table: events stored before this
-- migration keep tx and seq NULL and come first in the feed, ordered by
-- (timestamp, event_id). The defaults apply to every later insert, also
-- by a replica of the previous release during a rolling upgrade.
CREATE SEQUENCE events_feed_seq;
ALTER TABLE events
    ADD COLUMN tx xid8,
    ADD COLUMN seq bigint,
    ADD COLUMN late boolean NOT NULL DEFAULT false;
ALTER TABLE events
    ALTER COLUMN tx SET DEFAULT pg_current_xact_id(),
    ALTER COLUMN seq SET DEFAULT nextval('events_feed_seq');
ALTER SEQUENCE events_feed_seq OWNED BY events.seq;

-- +goose Down
ALTER TABLE events DROP COLUMN late, DROP COLUMN seq, DROP COLUMN tx;
