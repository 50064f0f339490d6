-- +goose Up
-- audit_log records what must be found later, such as the scope violations of
-- ingestion (action events.scope_violation; canonical-event.md, Delivery).
CREATE TABLE audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    action     text        NOT NULL,
    credential text        NOT NULL,
    event_id   text        NOT NULL,
    platform   text        NOT NULL,
    cloud      text        NOT NULL
);

-- Listings filter by action and page by (at, id), oldest first.
CREATE INDEX idx_audit_log_action ON audit_log (action, at, id);

-- +goose Down
DROP TABLE audit_log;
