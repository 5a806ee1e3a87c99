-- The claims of an upload whose processing its file made fail (an error
-- that is no fault of the service, a panic). Its other claims, attempts
-- less failures, were interrupted: the process died or lost its lease,
-- which is never the file's fault.

-- +goose Up
ALTER TABLE uploads ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE uploads DROP COLUMN failures;
