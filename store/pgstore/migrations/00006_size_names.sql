-- +goose Up
-- size_names holds the names that replace provider ids in payload.size
-- (canonical-event.md, Size names): in the size of a (cloud, resource_type)
-- event, a member holding the string value is replaced by name. A
-- reconciliation run replaces a cloud's rows in one transaction.
CREATE TABLE size_names (
    cloud         text NOT NULL,
    resource_type text NOT NULL,
    member        text NOT NULL,
    value         text NOT NULL,
    name          text NOT NULL,
    PRIMARY KEY (cloud, resource_type, member, value)
);

-- +goose Down
DROP TABLE size_names;
