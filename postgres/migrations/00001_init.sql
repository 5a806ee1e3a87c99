-- Times are timestamptz, written by the service already truncated to
-- milliseconds (the precision the domain shows); money is bigint hundredths.
-- Ids that are sorted or paged by (store ids, EANs) use the "C" collation,
-- so that they sort bytewise as in Go and in the SQLite store, whatever the
-- database's default collation.

-- +goose Up
CREATE TABLE partners (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE clients (
    id           text PRIMARY KEY,
    partner_id   text NOT NULL REFERENCES partners (id),
    country_code text NOT NULL,
    currency     text NOT NULL,
    created_at   timestamptz NOT NULL,
    UNIQUE (partner_id, country_code)
);

CREATE TABLE api_keys (
    id         text PRIMARY KEY,
    client_id  text NOT NULL REFERENCES clients (id),
    hash       text NOT NULL UNIQUE,
    prefix     text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX api_keys_client ON api_keys (client_id);

CREATE TABLE stores (
    client_id  text NOT NULL REFERENCES clients (id),
    id         text COLLATE "C" NOT NULL,
    name       text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (client_id, id)
);

-- The upload token bucket of a client, shared by every process: Accept locks
-- the row (SELECT … FOR UPDATE), so two processes never both take the same
-- bytes. The row is made on a client's first upload; tokens NULL is a full
-- bucket. tokens is a double so that an even refill does not lose fractions
-- of a byte at every update.
CREATE TABLE capacity (
    client_id  text PRIMARY KEY REFERENCES clients (id),
    tokens     double precision,
    updated_at timestamptz
);

-- An upload is also its own queue entry. seq gives acceptance order: a
-- client's uploads are inserted while its capacity row is locked, so their
-- seq order is also their commit order.
CREATE TABLE uploads (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    client_id     text NOT NULL REFERENCES clients (id),
    file_name     text NOT NULL,
    size_bytes    bigint NOT NULL,
    sha256        text NOT NULL,
    status        text NOT NULL CHECK (status IN ('accepted', 'processing', 'applied', 'rejected')),
    received_at   timestamptz NOT NULL,
    started_at    timestamptz,
    finished_at   timestamptz,
    rows_total    integer NOT NULL DEFAULT 0,
    rows_applied  integer NOT NULL DEFAULT 0,
    rows_rejected integer NOT NULL DEFAULT 0,
    errors        jsonb NOT NULL DEFAULT '[]',
    warnings      jsonb NOT NULL DEFAULT '[]',
    lease_owner   text,
    lease_until   timestamptz,
    attempts      integer NOT NULL DEFAULT 0
);
CREATE INDEX uploads_client ON uploads (client_id, seq);
CREATE INDEX uploads_unfinished ON uploads (seq) WHERE status IN ('accepted', 'processing');

-- The bytes of an upload until it is processed; kept apart so that listing
-- uploads never reads them. EXTERNAL storage: kept out of line but not
-- compressed, since a body lives only until it is applied and compressing
-- megabytes of CSV would slow every accept down.
CREATE TABLE upload_bodies (
    upload_id text PRIMARY KEY REFERENCES uploads (id),
    body      bytea NOT NULL
);
ALTER TABLE upload_bodies ALTER COLUMN body SET STORAGE EXTERNAL;

-- The stock in force. No foreign key to stores: checking one per row would
-- slow the bulk apply, and DeleteStore removes a store's stock itself.
CREATE TABLE stock (
    client_id        text NOT NULL,
    store_id         text COLLATE "C" NOT NULL,
    ean              text COLLATE "C" NOT NULL,
    article_number   text NOT NULL,
    quantity         integer NOT NULL,
    price            bigint NOT NULL,
    retail_price     bigint,
    article_location text NOT NULL DEFAULT '',
    product_name     text NOT NULL DEFAULT '',
    product_number   text NOT NULL DEFAULT '',
    article_color    text NOT NULL DEFAULT '',
    article_size     text NOT NULL DEFAULT '',
    upload_id        text NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (client_id, store_id, ean)
);

-- +goose Down
DROP TABLE stock;
DROP TABLE upload_bodies;
DROP TABLE uploads;
DROP TABLE capacity;
DROP TABLE stores;
DROP TABLE api_keys;
DROP TABLE clients;
DROP TABLE partners;
