-- The web console's revoked sessions (store.Sessions): the nonce of each
-- session signed out, kept until its cookie would have expired, so that
-- a sign-out holds on every replica and after every restart.

-- +goose Up
CREATE TABLE console_revoked_sessions (
    nonce   text PRIMARY KEY,
    expires timestamptz NOT NULL
);

CREATE INDEX console_revoked_sessions_expires ON console_revoked_sessions (expires);

-- +goose Down
DROP TABLE console_revoked_sessions;
