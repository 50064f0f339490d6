-- +goose Up
-- Migration versions are allocated by area so that work on one area never
-- renumbers another: 00002-00009 lifecycle ingestion, 00010-00019 event
-- correlation, 00020-00029 the projection of current resources.
SELECT 1;

-- +goose Down
SELECT 1;
