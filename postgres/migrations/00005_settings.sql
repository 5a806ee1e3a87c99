-- Settings of the whole installation, one row each. secret_key_check is the
-- check value of the secret key the sealed secrets are sealed with
-- (storelink.Sealer.Check, from which the key cannot be found): a process
-- given another key refuses to start rather than fail every delivery.

-- +goose Up
CREATE TABLE settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);

-- +goose Down
DROP TABLE settings;
