-- +goose Up
-- dead_letters keeps every refused item except scope refusals
-- (canonical-event.md, Delivery), with the reason it was refused.
--
-- raw is bytea: the item exactly as it arrived, NUL bytes and invalid UTF-8
-- included, which neither text nor json(b) could hold. It is NULL when the
-- item was larger than the ingest package's cap; raw_size is its size in
-- bytes either way.
CREATE TABLE dead_letters (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    raw         bytea,
    raw_size    integer     NOT NULL,
    reason      text        NOT NULL,
    event_id    text        NOT NULL,
    received_at timestamptz NOT NULL
);

-- Listings page by (received_at, id), oldest first.
CREATE INDEX idx_dead_letters_received ON dead_letters (received_at, id);

-- +goose Down
DROP TABLE dead_letters;
