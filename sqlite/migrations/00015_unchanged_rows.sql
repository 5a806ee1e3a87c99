-- Rows a feed re-sends as they are cost no write. digest is a CRC-64 of the
-- values a feed row sets (stockDigest); the apply reads it back to find the
-- rows whose values are already in force and writes only the others. A row
-- written before this migration has none, so it differs until it is written
-- once more. rows_unchanged counts the store/EAN pairs of an upload that
-- were left as they were.

-- +goose Up
ALTER TABLE stock ADD COLUMN digest INTEGER;
ALTER TABLE uploads ADD COLUMN rows_unchanged INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE uploads DROP COLUMN rows_unchanged;
ALTER TABLE stock DROP COLUMN digest;
