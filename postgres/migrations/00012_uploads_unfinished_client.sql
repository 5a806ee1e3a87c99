-- The unfinished uploads of each client, in acceptance order. A claim asks,
-- of every upload it looks at, whether its client has an earlier unfinished
-- upload that cannot be claimed with it: through this index that is a look
-- at the client's few unfinished uploads, not at every upload it ever sent.

-- +goose Up
CREATE INDEX uploads_unfinished_client ON uploads (client_id, seq) WHERE status IN ('accepted', 'processing');

-- +goose Down
DROP INDEX uploads_unfinished_client;
