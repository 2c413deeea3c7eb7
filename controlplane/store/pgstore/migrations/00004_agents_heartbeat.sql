-- What a heartbeat reads and writes, made cheap at 10,000 agents.
--
-- holder is the agent holding a task's lease while the task is live
-- (lapsed or not), null once it ended: Leased reads an agent's tasks by
-- it alone (its index is 00005's). Asked by lease_agent and "not ended",
-- PostgreSQL could also walk tasks_live, every live task in id order,
-- and it did whenever its statistics were older than the live tasks
-- (every heartbeat then read all of them). A trigger derives holder on
-- every write, so a replica of an older version, which knows nothing of
-- it, keeps it right too during a rolling upgrade or after a rollback;
-- tasks_leased stays for such a replica's own lookups.
--
-- agents_token_changed tells every replica's token cache (pgstore's
-- tokens.go) that an agent's token hash was revoked or replaced, with
-- the commit, whoever changed it: a replica, an older one, or a person
-- with psql.
--
-- An agent's row is rewritten at every heartbeat: with room left on its
-- page the new version goes beside the old one, and no index changes
-- (a HOT update). The setting applies to pages written from now on.

-- +goose Up
ALTER TABLE tasks ADD COLUMN holder text;

-- +goose StatementBegin
CREATE FUNCTION tasks_holder() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.holder := CASE WHEN NEW.ended_at IS NULL THEN NEW.lease_agent END;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER tasks_holder BEFORE INSERT OR UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION tasks_holder();
UPDATE tasks SET holder = lease_agent WHERE ended_at IS NULL AND lease_agent IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION agents_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('edgeagent_tokens', OLD.id);
    ELSE
        PERFORM pg_notify('edgeagent_tokens', NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER agents_token_changed AFTER UPDATE OF token_hash ON agents
    FOR EACH ROW WHEN (OLD.token_hash IS NOT NULL AND OLD.token_hash IS DISTINCT FROM NEW.token_hash)
    EXECUTE FUNCTION agents_token_changed();
CREATE TRIGGER agents_token_deleted AFTER DELETE ON agents
    FOR EACH ROW WHEN (OLD.token_hash IS NOT NULL)
    EXECUTE FUNCTION agents_token_changed();

ALTER TABLE agents SET (fillfactor = 50);

-- +goose Down
ALTER TABLE agents RESET (fillfactor);
DROP TRIGGER agents_token_deleted ON agents;
DROP TRIGGER agents_token_changed ON agents;
DROP FUNCTION agents_token_changed();
DROP TRIGGER tasks_holder ON tasks;
DROP FUNCTION tasks_holder();
ALTER TABLE tasks DROP COLUMN holder;
