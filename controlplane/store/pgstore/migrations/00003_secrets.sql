-- The store's secrets (store.Store.Secret): random bytes made the first
-- time a replica asks, the same to every replica from then on. The task
-- tokens' key is one: agent hosts hold none of it.

-- +goose Up
CREATE TABLE secrets (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);

-- +goose Down
DROP TABLE secrets;
