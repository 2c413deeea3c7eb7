-- The records each notification gate let through in its window
-- (store.NotifyGate.Passed): a record let through and cut by a crash
-- before its first delivery was recorded passes again instead of being
-- counted twice (and folded into itself, a window late). A constant
-- default: PostgreSQL does not rewrite the table for it.

-- +goose Up
ALTER TABLE notify_gates ADD COLUMN passed text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE notify_gates DROP COLUMN passed;
