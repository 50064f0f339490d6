-- +goose Up
-- resource_types is the size-schema registry (canonical-event.md, Size
-- schemas): the JSON Schema payload.size of a (platform, resource_type) event
-- must satisfy.
--
-- size_schema is json, not jsonb: a schema reads back as the exact bytes that
-- were put (member order, spelling of numbers), which jsonb would normalise.
-- version starts at 1 and grows by one on every put; the compiled-schema cache
-- is keyed by it.
CREATE TABLE resource_types (
    platform      text        NOT NULL,
    resource_type text        NOT NULL,
    size_schema   json        NOT NULL,
    version       bigint      NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (platform, resource_type)
);

-- +goose Down
DROP TABLE resource_types;
