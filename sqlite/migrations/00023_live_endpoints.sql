-- A deleted endpoint's row stays, for its history, and is read by no
-- write again: the indexes the writes use hold the endpoints that are not
-- deleted only, so that a partner that makes and deletes endpoints again
-- and again slows nothing. endpoints_live gives a client's endpoints (the
-- fan-out of each order event, the count of the per-client bound, the
-- lists); endpoints_disabled the disabled ones the deliverer's queue reads
-- after an endpoint changed.

-- +goose Up
DROP INDEX endpoints_client;
CREATE INDEX endpoints_live ON endpoints (client_id) WHERE deleted_at IS NULL;
CREATE INDEX endpoints_disabled ON endpoints (id) WHERE enabled = 0 AND deleted_at IS NULL;

-- +goose Down
DROP INDEX endpoints_disabled;
DROP INDEX endpoints_live;
CREATE INDEX endpoints_client ON endpoints (client_id);
