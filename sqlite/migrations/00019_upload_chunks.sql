-- An upload's file is kept in pieces of at most 256 KiB (storelink.Chunks),
-- rows of upload_chunks under a file id; upload_bodies names the file of
-- each upload. The pieces of a large file are written before the upload is
-- accepted, each in a transaction of its own: a row of megabytes held the
-- one writer while every other write waited for it. A file no upload names
-- is removed by the file sweeper, and the pieces of a file go with its
-- upload_bodies row (the trigger).

-- +goose Up
CREATE TABLE upload_chunks (
    file_id TEXT NOT NULL,
    n       INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (file_id, n)
);
ALTER TABLE upload_bodies ADD COLUMN file_id TEXT;
WITH RECURSIVE pieces (upload_id, n, size) AS (
    SELECT upload_id, 0, length(body) FROM upload_bodies
    UNION ALL
    SELECT upload_id, n + 1, size FROM pieces WHERE (n + 1) * 262144 < size
)
INSERT INTO upload_chunks (file_id, n, data)
    SELECT p.upload_id, p.n, substr(b.body, p.n * 262144 + 1, 262144)
    FROM pieces p JOIN upload_bodies b ON b.upload_id = p.upload_id;
UPDATE upload_bodies SET file_id = upload_id;
ALTER TABLE upload_bodies DROP COLUMN body;
CREATE INDEX upload_bodies_file ON upload_bodies (file_id);
-- +goose StatementBegin
CREATE TRIGGER upload_bodies_chunks AFTER DELETE ON upload_bodies BEGIN
    DELETE FROM upload_chunks WHERE file_id = old.file_id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER upload_bodies_chunks;
DROP INDEX upload_bodies_file;
ALTER TABLE upload_bodies ADD COLUMN body BLOB NOT NULL DEFAULT x'';
UPDATE upload_bodies SET body = coalesce((SELECT CAST(group_concat(data, '' ORDER BY n) AS BLOB)
    FROM upload_chunks c WHERE c.file_id = upload_bodies.file_id), x'');
ALTER TABLE upload_bodies DROP COLUMN file_id;
DROP TABLE upload_chunks;
