-- The index of tasks.holder (00004), built without holding up the
-- table's writes: a replica still serving goes on while it is built
-- (over a long history, the build reads every task). Should the build
-- fail, the index it leaves is invalid: drop it (DROP INDEX CONCURRENTLY
-- tasks_holder) and start a replica again.

-- +goose NO TRANSACTION

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_holder ON tasks (holder, id) WHERE holder IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_holder;
