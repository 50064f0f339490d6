-- +goose Up
-- The record of each reconciliation run (package ingest/reconcile),
-- written by Ingest.Commit in the transaction of the run's synthetic
-- events and size names. Listed newest first, all clouds or one
-- (GET /api/v1/sync-runs): the primary key and (cloud, id) serve both.
CREATE TABLE sync_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cloud       text        NOT NULL,
    platform    text        NOT NULL,
    observed_at timestamptz NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    status      text        NOT NULL,
    created     integer     NOT NULL,
    updated     integer     NOT NULL,
    deleted     integer     NOT NULL,
    unchanged   integer     NOT NULL,
    skipped     integer     NOT NULL,
    refused     integer     NOT NULL,
    errors      text[]      NOT NULL
);

CREATE INDEX sync_runs_cloud ON sync_runs (cloud, id);

-- +goose Down
DROP TABLE sync_runs;
