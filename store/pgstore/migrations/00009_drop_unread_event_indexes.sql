-- +goose Up
-- No statement of the product reads events by project_id or by
-- event_type (listings and histories select by cloud, resource_type and
-- resource_id, which idx_events_resource serves), yet every ingested event
-- paid for two more b-tree entries. The bounds on event_type and project_id
-- (canonical-event.md) stay: idx_events_resource still indexes the other
-- identifiers, and a bound is a rule of the event, not of an index.
DROP INDEX idx_events_project;
DROP INDEX idx_events_type;

-- +goose Down
CREATE INDEX idx_events_project ON events (project_id, timestamp);
CREATE INDEX idx_events_type ON events (event_type, timestamp);
