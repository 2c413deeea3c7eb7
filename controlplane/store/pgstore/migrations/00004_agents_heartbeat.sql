-- What a heartbeat reads and writes, made cheap at 10,000 agents.
--
-- holder is the agent holding a task's lease while the task is live
-- (lapsed or not), null once it ended: Leased reads an agent's tasks by
-- it alone. Asked by lease_agent and "not ended", PostgreSQL could also
-- walk tasks_live, every live task in id order, and it did whenever its
-- statistics were older than the live tasks (every heartbeat then read
-- all of them).
--
-- An agent's row is rewritten at every heartbeat: with room left on its
-- page the new version goes beside the old one, and no index changes
-- (a HOT update).

-- +goose Up
ALTER TABLE tasks ADD COLUMN holder text;
UPDATE tasks SET holder = lease_agent WHERE ended_at IS NULL AND lease_agent IS NOT NULL;
CREATE INDEX tasks_holder ON tasks (holder, id) WHERE holder IS NOT NULL;
DROP INDEX tasks_leased;
ALTER TABLE agents SET (fillfactor = 50);

-- +goose Down
ALTER TABLE agents RESET (fillfactor);
CREATE INDEX tasks_leased ON tasks (lease_agent) WHERE ended_at IS NULL AND lease_agent IS NOT NULL;
DROP INDEX tasks_holder;
ALTER TABLE tasks DROP COLUMN holder;
