-- An upload's bytes are kept after it is processed, for the partner to
-- download, until --upload-retention has passed since it was received;
-- beside them, the error file made when it was processed. file_expired_at
-- is when the files were removed.

-- +goose Up
ALTER TABLE upload_bodies ADD COLUMN errors_csv bytea;
ALTER TABLE uploads ADD COLUMN file_expired_at timestamptz;

-- +goose Down
ALTER TABLE uploads DROP COLUMN file_expired_at;
ALTER TABLE upload_bodies DROP COLUMN errors_csv;
