-- A deleted endpoint's row stays, for its history, and is read by no
-- write again: the indexes the writes use hold the endpoints that are not
-- deleted only, so that a partner that makes and deletes endpoints again
-- and again slows nothing. endpoints_live gives a client's endpoints (the
-- fan-out of each order event, the count of the per-client bound, the
-- lists); endpoints_enabled the enabled ones every claim of deliveries
-- starts from.

-- +goose Up
DROP INDEX endpoints_client;
CREATE INDEX endpoints_live ON endpoints (client_id) WHERE deleted_at IS NULL;
CREATE INDEX endpoints_enabled ON endpoints (id) WHERE enabled;

-- +goose Down
DROP INDEX endpoints_enabled;
DROP INDEX endpoints_live;
CREATE INDEX endpoints_client ON endpoints (client_id);
