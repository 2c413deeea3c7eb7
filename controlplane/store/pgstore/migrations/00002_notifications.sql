-- The notifications waiting for delivery (store.Notifier): one row per
-- notification and target, written in the transaction of the change that
-- causes it, deleted once delivered or given up on.

-- +goose Up
CREATE TABLE notifications (
    id         text NOT NULL,
    target     text NOT NULL,
    -- The api.Notification, as JSON.
    body       bytea NOT NULL,
    created    timestamptz NOT NULL,
    due        timestamptz NOT NULL,
    attempts   integer NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT '',
    PRIMARY KEY (id, target)
);

CREATE INDEX notifications_due ON notifications (due, id, target);

-- +goose Down
DROP TABLE notifications;
