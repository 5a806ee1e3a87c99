-- When each API key last authenticated a request, to the minute (written
-- a minute apart by serve, never by the request itself); NULL for never.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN last_used_at;
