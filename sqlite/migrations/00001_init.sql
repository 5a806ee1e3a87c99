-- Times are INTEGER unix milliseconds (UTC); money is INTEGER hundredths.

-- +goose Up
CREATE TABLE partners (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE clients (
    id           TEXT PRIMARY KEY,
    partner_id   TEXT NOT NULL REFERENCES partners (id),
    country_code TEXT NOT NULL,
    currency     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    UNIQUE (partner_id, country_code)
);

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL REFERENCES clients (id),
    hash       TEXT NOT NULL UNIQUE,
    prefix     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_client ON api_keys (client_id);

CREATE TABLE stores (
    client_id  TEXT NOT NULL REFERENCES clients (id),
    id         TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (client_id, id)
);

-- The upload token bucket of a client. tokens is REAL so that an even refill
-- over the window does not lose fractions of a byte at every update.
CREATE TABLE capacity (
    client_id  TEXT PRIMARY KEY REFERENCES clients (id),
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL
);

-- An upload is also its own queue entry (seq gives acceptance order).
CREATE TABLE uploads (
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
CREATE INDEX uploads_client ON uploads (client_id, seq);
CREATE INDEX uploads_unfinished ON uploads (seq) WHERE status IN ('accepted', 'processing');

-- The bytes of an upload until it is processed; kept apart so that listing
-- uploads never reads them.
CREATE TABLE upload_bodies (
    upload_id TEXT PRIMARY KEY REFERENCES uploads (id),
    body      BLOB NOT NULL
);

-- The stock in force. No foreign key to stores: checking one per row would
-- slow the bulk apply, and DeleteStore removes a store's stock itself.
CREATE TABLE stock (
    client_id        TEXT NOT NULL,
    store_id         TEXT NOT NULL,
    ean              TEXT NOT NULL,
    article_number   TEXT NOT NULL,
    quantity         INTEGER NOT NULL,
    price            INTEGER NOT NULL,
    retail_price     INTEGER,
    article_location TEXT NOT NULL DEFAULT '',
    product_name     TEXT NOT NULL DEFAULT '',
    product_number   TEXT NOT NULL DEFAULT '',
    article_color    TEXT NOT NULL DEFAULT '',
    article_size     TEXT NOT NULL DEFAULT '',
    upload_id        TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (client_id, store_id, ean)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE stock;
DROP TABLE upload_bodies;
DROP TABLE uploads;
DROP TABLE capacity;
DROP TABLE stores;
DROP TABLE api_keys;
DROP TABLE clients;
DROP TABLE partners;
