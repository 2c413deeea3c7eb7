-- When an agent's record was made (its latest heartbeat): replicas write
-- the records they heard a moment later, together, and an older record
-- never replaces a newer one.

-- +goose Up
ALTER TABLE agents ADD COLUMN seen_at timestamptz;

-- +goose Down
ALTER TABLE agents DROP COLUMN seen_at;
