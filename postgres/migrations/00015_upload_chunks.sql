-- An upload's file is kept in pieces of at most 256 KiB (storelink.Chunks),
-- rows of upload_chunks under a file id; upload_bodies names the file of
-- each upload. The pieces of a large file are written before the upload is
-- accepted, in a transaction of their own, and read once the claim that
-- takes it committed: no transaction that holds an upload's or a bucket's
-- lock moves megabytes. A file no upload names is removed by the file
-- sweeper, and the pieces of a file go with its upload_bodies row (the
-- trigger).

-- +goose Up
CREATE TABLE upload_chunks (
    file_id text NOT NULL,
    n       integer NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (file_id, n)
);
ALTER TABLE upload_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE upload_bodies ADD COLUMN file_id text;
INSERT INTO upload_chunks (file_id, n, data)
    SELECT upload_id, g.n, substring(body FROM g.n * 262144 + 1 FOR 262144)
    FROM upload_bodies, generate_series(0, greatest((length(body) - 1) / 262144, 0)) AS g (n);
UPDATE upload_bodies SET file_id = upload_id;
ALTER TABLE upload_bodies ALTER COLUMN file_id SET NOT NULL, DROP COLUMN body;
CREATE INDEX upload_bodies_file ON upload_bodies (file_id);
-- +goose StatementBegin
CREATE FUNCTION upload_bodies_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM upload_chunks WHERE file_id = OLD.file_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER upload_bodies_chunks AFTER DELETE ON upload_bodies
    FOR EACH ROW EXECUTE FUNCTION upload_bodies_chunks();

-- +goose Down
DROP TRIGGER upload_bodies_chunks ON upload_bodies;
DROP FUNCTION upload_bodies_chunks();
ALTER TABLE upload_bodies ADD COLUMN body bytea;
UPDATE upload_bodies b SET body = coalesce((SELECT string_agg(data, ''::bytea ORDER BY n)
    FROM upload_chunks c WHERE c.file_id = b.file_id), ''::bytea);
ALTER TABLE upload_bodies ALTER COLUMN body SET NOT NULL, ALTER COLUMN body SET STORAGE EXTERNAL;
DROP INDEX upload_bodies_file;
ALTER TABLE upload_bodies DROP COLUMN file_id;
DROP TABLE upload_chunks;
