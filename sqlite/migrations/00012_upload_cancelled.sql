-- An upload may be cancelled by its client while it is still accepted.
-- SQLite cannot change a CHECK constraint in place, so the table is made
-- anew and its rows copied (https://sqlite.org/lang_altertable.html). The
-- foreign keys stay on, as goose runs this in a transaction: upload_bodies,
-- the one table that refers to uploads, is made anew too and dropped first,
-- so that no row refers to the old table when it is dropped; renaming the
-- new tables carries the reference over to the new name.

-- +goose Up
CREATE TABLE uploads_new (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    client_id     TEXT NOT NULL REFERENCES clients (id),
    file_name     TEXT NOT NULL,
    size_bytes    INTEGER NOT NULL,
    sha256        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('accepted', 'processing', 'applied', 'rejected', 'cancelled')),
    received_at   INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    rows_total    INTEGER NOT NULL DEFAULT 0,
    rows_applied  INTEGER NOT NULL DEFAULT 0,
    rows_rejected INTEGER NOT NULL DEFAULT 0,
    errors        TEXT NOT NULL DEFAULT '[]',
    warnings      TEXT NOT NULL DEFAULT '[]',
    lease_owner   TEXT,
    lease_until   INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO uploads_new SELECT seq, id, client_id, file_name, size_bytes, sha256, status, received_at, started_at,
    finished_at, rows_total, rows_applied, rows_rejected, errors, warnings, lease_owner, lease_until, attempts FROM uploads;
CREATE TABLE upload_bodies_new (
    upload_id TEXT PRIMARY KEY REFERENCES uploads_new (id),
    body      BLOB NOT NULL
);
INSERT INTO upload_bodies_new SELECT upload_id, body FROM upload_bodies;
DROP TABLE upload_bodies;
DROP TABLE uploads;
ALTER TABLE uploads_new RENAME TO uploads;
ALTER TABLE upload_bodies_new RENAME TO upload_bodies;
CREATE INDEX uploads_client ON uploads (client_id, seq);
CREATE INDEX uploads_unfinished ON uploads (seq) WHERE status IN ('accepted', 'processing');

-- +goose Down
UPDATE uploads SET status = 'rejected' WHERE status = 'cancelled';
CREATE TABLE uploads_new (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    client_id     TEXT NOT NULL REFERENCES clients (id),
    file_name     TEXT NOT NULL,
    size_bytes    INTEGER NOT NULL,
    sha256        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('accepted', 'processing', 'applied', 'rejected')),
    received_at   INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    rows_total    INTEGER NOT NULL DEFAULT 0,
    rows_applied  INTEGER NOT NULL DEFAULT 0,
    rows_rejected INTEGER NOT NULL DEFAULT 0,
    errors        TEXT NOT NULL DEFAULT '[]',
    warnings      TEXT NOT NULL DEFAULT '[]',
    lease_owner   TEXT,
    lease_until   INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO uploads_new SELECT seq, id, client_id, file_name, size_bytes, sha256, status, received_at, started_at,
    finished_at, rows_total, rows_applied, rows_rejected, errors, warnings, lease_owner, lease_until, attempts FROM uploads;
CREATE TABLE upload_bodies_new (
    upload_id TEXT PRIMARY KEY REFERENCES uploads_new (id),
    body      BLOB NOT NULL
);
INSERT INTO upload_bodies_new SELECT upload_id, body FROM upload_bodies;
DROP TABLE upload_bodies;
DROP TABLE uploads;
ALTER TABLE uploads_new RENAME TO uploads;
ALTER TABLE upload_bodies_new RENAME TO upload_bodies;
CREATE INDEX uploads_client ON uploads (client_id, seq);
CREATE INDEX uploads_unfinished ON uploads (seq) WHERE status IN ('accepted', 'processing');
