-- The control plane's records. A task is its JSON document (doc, the
-- state.Task as json.Marshal writes it); the other columns of tasks are
-- derived from it on every save, for the indexes: the store never reads
-- them back into a task. Read a document with convert_from(doc, 'UTF8')::jsonb.

-- +goose Up
CREATE TABLE tasks (
    id          text PRIMARY KEY,
    -- CreatedAt in nanoseconds since 1970 (timestamptz keeps microseconds,
    -- and the lists' order is CreatedAt's, to the nanosecond, then id).
    created_ns  bigint NOT NULL,
    phase       text NOT NULL,
    repo        text NOT NULL DEFAULT '',
    -- The agent holding the task's lease, lapsed or not.
    lease_agent text,
    -- When the task ended (state.EndedAt), set while its phase is terminal.
    ended_at    timestamptz,
    doc         bytea NOT NULL
) WITH (fillfactor = 80);

CREATE INDEX tasks_order ON tasks (created_ns, id);
CREATE INDEX tasks_queued ON tasks (created_ns, id) WHERE phase = 'queued';
CREATE INDEX tasks_leased ON tasks (lease_agent) WHERE ended_at IS NULL AND lease_agent IS NOT NULL;
CREATE INDEX tasks_live ON tasks (id) WHERE ended_at IS NULL;
CREATE INDEX tasks_ended ON tasks (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX tasks_phase ON tasks (phase);

-- A task's accepted events: every key, and the line of those stored
-- (seq and line are null for an event whose output was cut).
CREATE TABLE events (
    task_id text NOT NULL,
    key     text NOT NULL,
    seq     integer,
    line    bytea,
    PRIMARY KEY (task_id, key)
);

CREATE INDEX events_seq ON events (task_id, seq) WHERE seq IS NOT NULL;

-- Agents: the token hash registration gave one (null once revoked or
-- before), and the record of its latest heartbeat (store.Agent as JSON,
-- null before the first); repos are the record's repositories, for Serves.
CREATE TABLE agents (
    id         text PRIMARY KEY,
    token_hash text UNIQUE,
    record     bytea,
    repos      text[] NOT NULL DEFAULT '{}'
);

CREATE INDEX agents_repos ON agents USING gin (repos);

-- +goose Down
DROP TABLE agents;
DROP TABLE events;
DROP TABLE tasks;
