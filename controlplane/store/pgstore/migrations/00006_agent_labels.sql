-- Labels people grant agents (agent agents label; docs/routing.md): the
-- only labels a task's label requirement is matched against. They are
-- kept on the agent's row beside its token, apart from its record, which
-- every heartbeat replaces: what an agent says of itself never changes
-- them. granted_labels is the labels as a JSON object, null when none
-- were ever granted; Revoke clears them with the token.
--
-- adopt_labels marks an agent registered before this migration: it is
-- granted the labels it advertises, once, at its next heartbeat or
-- claim (the upgrade's path: an installation where nobody set labels by
-- hand routes as before). An agent registered after adopts nothing.

-- +goose Up
ALTER TABLE agents ADD COLUMN granted_labels bytea;
ALTER TABLE agents ADD COLUMN adopt_labels boolean NOT NULL DEFAULT false;
UPDATE agents SET adopt_labels = true WHERE token_hash IS NOT NULL;

-- +goose Down
ALTER TABLE agents DROP COLUMN adopt_labels;
ALTER TABLE agents DROP COLUMN granted_labels;
