-- +goose Up
-- The projection of current resources (canonical-event.md, Event: derived
-- from the events table and rebuildable). One row per resource key, written
-- inside the ingest transaction by the fold of ingest.Apply / ingest.Fold.
CREATE TABLE current_resources (
    cloud           text        NOT NULL,
    resource_type   text        NOT NULL,
    resource_id     text        NOT NULL,
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
CREATE INDEX idx_current_resources_type ON current_resources (resource_type, state);
CREATE INDEX idx_current_resources_stats ON current_resources (platform, cloud, resource_type, project_id, state);
CREATE INDEX idx_current_resources_project ON current_resources (project_id);

-- +goose Down
DROP TABLE current_resources;
