-- +goose NO TRANSACTION
-- +goose Up
-- The feed's order (00012): an index range scan from a cursor that stops at
-- LIMIT. idx_events_feed_legacy holds only the events stored before 00012
-- (tx IS NULL), read first in (timestamp, event_id) order; a new event adds
-- no entry to it. CONCURRENTLY, as 00011, so that ingestion goes on while
-- they build (see 00011 for a build that failed midway, and timescaledb).
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_feed ON events (tx, seq);
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_feed_legacy ON events (timestamp, event_id COLLATE "C") WHERE tx IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idx_events_feed_legacy;
DROP INDEX CONCURRENTLY IF EXISTS idx_events_feed;
