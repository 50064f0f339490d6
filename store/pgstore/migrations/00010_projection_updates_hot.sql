-- +goose NO TRANSACTION
-- +goose Up
-- Every Commit updates most of the projection rows it touches,
-- and most updates change state. While state is in an index, no such update
-- is HOT: each one adds an entry to every index of current_resources, and
-- the upsert cost about as much database CPU as the events COPY. Without
-- the two indexes that hold state, an update that changes neither the key
-- nor project_id can be HOT. Measured on the project's shared 2-core
-- machine (tally-bench, 100k events, medians of alternating runs, database
-- CPU per event): library 30.4 -> 25.6 us and HTTP 29.4 -> 26.0 us (8
-- runs each); 28.8 -> 26.7 and 29.6 -> 25.5 (6 runs, on top of the Go
-- changes). Dropping either index alone, or adding fillfactor 70, gave no
-- measurable gain.
--
-- What the reads lose (EXPLAIN ANALYZE, 200k rows: 5 types, 4 clouds, 50
-- projects, state error on 0.1 %): a listing by a rare state and nothing
-- selective besides (with or without resource_type, or with a cloud) reads
-- the table in key order: vacuumed, 0.1-1 ms -> 6-22 ms; with two dead
-- versions of every row (no vacuum), 0.2-4 ms -> 110-400 ms. A listing with
-- all five filters 0.2 -> 2 ms; CountResources (the gauge's GROUP BY,
-- every 30 s) 30 -> 38 ms. Listings by key, resource_type, project_id
-- (idx_current_resources_project stays), cloud, or a common state stay
-- within a few milliseconds when vacuumed. The README's Performance
-- section had kept these indexes for this reason (270 ms against 35-50 ms
-- in its own measurement).
--
-- CONCURRENTLY, outside a transaction: a plain DROP INDEX queues for an
-- ACCESS EXCLUSIVE lock on current_resources, and every ingest and read
-- behind it waits too, for as long as the longest transaction in flight,
-- during a rolling upgrade. IF EXISTS makes a rerun after a failure
-- between the two statements finish the work.
DROP INDEX CONCURRENTLY IF EXISTS idx_current_resources_type;
DROP INDEX CONCURRENTLY IF EXISTS idx_current_resources_stats;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_current_resources_type ON current_resources (resource_type, state);
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_current_resources_stats ON current_resources (platform, cloud, resource_type, project_id, state);
