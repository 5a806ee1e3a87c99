-- The endpoints that are disabled and not deleted, which the deliverer's
-- queue reads after an endpoint changed: as few as the partners keep
-- disabled, whatever the number of deleted endpoints kept for their
-- history.

-- +goose Up
CREATE INDEX endpoints_disabled ON endpoints (id) WHERE enabled = 0 AND deleted_at IS NULL;

-- +goose Down
DROP INDEX endpoints_disabled;
