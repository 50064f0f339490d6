-- +goose Up
-- Correlated events (event-correlation.md). One row per recorded event.
-- user_id is '' for a call that identifies no user (never NULL), so that the
-- idempotency primary key below is unique for such callers too; the partial
-- unique index excludes those rows, as such a call never matches an open event.
-- Optional strings are NULL when absent. metadata and extra are json (not
-- jsonb) so that they come back byte for byte as sent.
CREATE TABLE correlated_events (
    id               uuid PRIMARY KEY,
    organization     text        NOT NULL,
    user_id          text        NOT NULL DEFAULT '',
    owner            text        NOT NULL DEFAULT '',
    system_id        text        NOT NULL DEFAULT '',
    acted_upon       text        NOT NULL DEFAULT '',
    operation_id     text        NOT NULL DEFAULT '',
    category         text        NOT NULL,
    action           text        NOT NULL,
    severity         text        NOT NULL,
    status           text        NOT NULL,
    description      text        NOT NULL DEFAULT '',
    metadata         json,
    extra            json,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    deleted_at       timestamptz,
    correlation_key  text,
    occurrence_count bigint,
    first_seen_at    timestamptz,
    last_seen_at     timestamptz,
    resolved_at      timestamptz,
    source           text,
    type             text,
    specversion      text,
    trace_id         text,
    parent_id        text
);

-- "A caller has at most one open event per correlationKey": open means no
-- resolved_at; a soft-deleted event no longer counts as open. The predicate
-- is repeated verbatim in the ON CONFLICT clause of pgstore/correlate.go.
CREATE UNIQUE INDEX correlated_events_open_key
    ON correlated_events (organization, user_id, correlation_key)
    WHERE resolved_at IS NULL AND deleted_at IS NULL AND user_id <> '' AND correlation_key IS NOT NULL;

-- getEvents: a scope's live events, newest first.
CREATE INDEX correlated_events_scope
    ON correlated_events (organization, user_id, created_at DESC, id DESC)
    WHERE deleted_at IS NULL;

-- Idempotency keys, scoped to (organization, user); user_id '' for a call
-- that identifies no user. Written in the same transaction as the effect.
CREATE TABLE correlated_event_idempotency_keys (
    organization text        NOT NULL,
    user_id      text        NOT NULL,
    key          text        NOT NULL,
    event_id     uuid        NOT NULL REFERENCES correlated_events (id) ON DELETE CASCADE,
    bound_at     timestamptz NOT NULL,
    PRIMARY KEY (organization, user_id, key)
);

CREATE INDEX correlated_event_idempotency_keys_bound_at
    ON correlated_event_idempotency_keys (bound_at);

-- +goose Down
DROP TABLE correlated_event_idempotency_keys;
DROP TABLE correlated_events;
