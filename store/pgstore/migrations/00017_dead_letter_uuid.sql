-- +goose Up
-- Each dead letter gets a UUID, the id GET /api/v1/rejected-events serves
-- (Tally's dead letters are identified by one); the identity column stays
-- the order and the cursor. A random default fills the existing rows,
-- which rewrites dead_letters once (retention keeps it small).
ALTER TABLE dead_letters ADD COLUMN uuid uuid NOT NULL DEFAULT gen_random_uuid();

-- +goose Down
ALTER TABLE dead_letters DROP COLUMN uuid;
