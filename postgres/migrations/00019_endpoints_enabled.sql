-- The enabled endpoints, which every claim of deliveries starts from: as
-- few as the partners keep, whatever the number of deleted endpoints kept
-- (disabled) for their history.

-- +goose Up
CREATE INDEX endpoints_enabled ON endpoints (id) WHERE enabled;

-- +goose Down
DROP INDEX endpoints_enabled;
