-- The web console's revoked sessions (store.Sessions): the nonce of each
-- session signed out, kept until its cookie would have expired, so that
-- a sign-out holds on every replica and after every restart.
--
-- The notification gates (store.NotifyGate): the deliverer's rate limits,
-- one row per target and limit, each with the window it counts in and
-- the record (notifications.gate names its gate) that folds what it held
-- back. The column notifications.gate is added with a constant default:
-- PostgreSQL does not rewrite the table for it.

-- +goose Up
CREATE TABLE console_revoked_sessions (
    nonce   text PRIMARY KEY,
    expires timestamptz NOT NULL
);

CREATE INDEX console_revoked_sessions_expires ON console_revoked_sessions (expires);

ALTER TABLE notifications ADD COLUMN gate text NOT NULL DEFAULT '';

CREATE TABLE notify_gates (
    target   text NOT NULL,
    gate_key text NOT NULL,
    ends     timestamptz NOT NULL,
    sent     integer NOT NULL DEFAULT 0,
    held     text NOT NULL DEFAULT '',
    rev      bigint NOT NULL,
    PRIMARY KEY (target, gate_key)
);

CREATE INDEX notify_gates_ends ON notify_gates (ends);

-- +goose Down
DROP TABLE notify_gates;
ALTER TABLE notifications DROP COLUMN gate;
DROP TABLE console_revoked_sessions;
