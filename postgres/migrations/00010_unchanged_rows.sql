-- rows_unchanged counts the store/EAN pairs of an upload whose stock row
-- already held exactly what the file sets, and which were left as they were.

-- +goose Up
ALTER TABLE uploads ADD COLUMN rows_unchanged integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE uploads DROP COLUMN rows_unchanged;
