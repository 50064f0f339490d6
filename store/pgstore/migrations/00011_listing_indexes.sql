-- +goose NO TRANSACTION
-- +goose Up
-- GET /api/v1/events (Ingest.Events) filters by any of cloud, platform,
-- project_id, resource_type, resource_id, event_type and source, a window
-- on timestamp and a keyset cursor, and orders by (timestamp, event_id
-- COLLATE "C"). 00009 dropped the project_id and event_type indexes as
-- unread, but this listing reads by both, and no index had its order:
-- every page read the whole table and sorted it (1M rows: a sequential
-- scan per page). Each index below ends with the listing's order, so a page
-- is an index range scan that stops at LIMIT, with no sort:
--
--   - idx_events_time: no filter, a time window, the cursor alone, or only
--     filters that the other indexes do not lead with (platform, source,
--     cloud alone), checked row by row as the scan walks in order;
--   - idx_events_project, idx_events_type: project_id and event_type,
--     selective, the reason 00009's indexes existed;
--   - idx_events_resource_id: resource_id without its cloud and type (a
--     resource's events across clouds are few; idx_events_resource cannot
--     serve it, as cloud leads it);
--   - a filter on the resource (cloud, resource_type, resource_id) keeps
--     idx_events_resource (00001), whose timestamp order leaves only ties
--     to sort (an incremental sort).
--
-- GET /api/v1/audit without an action orders by (at, id), which the
-- (action, at, id) index of 00003 cannot give: idx_audit_log_at does.
-- audit_log takes a row per refusal or admin action, not per stored event.
--
-- TestEventListingPlans checks every filter of the route with EXPLAIN over
-- 200k rows, TestOtherListingPlans those of dead letters, audit and
-- resources. The write cost, four more b-tree entries per stored event,
-- is measured in docs/operations.md (Storage).
--
-- CONCURRENTLY, outside a transaction, as in 00010: a plain CREATE INDEX
-- holds a SHARE lock that stops ingestion for as long as the build takes
-- (minutes at 10M events) during a rolling upgrade. IF NOT EXISTS makes a
-- rerun after a failure between statements finish the work; a build that
-- failed midway leaves an INVALID index that IF NOT EXISTS keeps, so drop
-- such an index by hand before rerunning (docs/operations.md). timescaledb
-- refuses CONCURRENTLY on a hypertable: there, create these indexes by hand
-- (same names) before migrating, and this migration finds them.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_time ON events (timestamp, event_id COLLATE "C");
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_project ON events (project_id, timestamp, event_id COLLATE "C");
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_type ON events (event_type, timestamp, event_id COLLATE "C");
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_events_resource_id ON events (resource_id, timestamp, event_id COLLATE "C");
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_audit_log_at ON audit_log (at, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idx_audit_log_at;
DROP INDEX CONCURRENTLY IF EXISTS idx_events_resource_id;
DROP INDEX CONCURRENTLY IF EXISTS idx_events_type;
DROP INDEX CONCURRENTLY IF EXISTS idx_events_project;
DROP INDEX CONCURRENTLY IF EXISTS idx_events_time;
