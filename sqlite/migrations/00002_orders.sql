-- Orders, their items (one row per unit) and the order events.

-- +goose Up
CREATE TABLE orders (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    client_id           TEXT NOT NULL REFERENCES clients (id),
    order_number        TEXT NOT NULL,
    store_id            TEXT, -- NULL for orders of the marketplace warehouse
    state               TEXT NOT NULL CHECK (state IN ('assigned', 'cancelled', 'fulfilled', 'returned',
                            'marketplace_warehouse_fulfilled', 'marketplace_warehouse_returned')),
    billing             TEXT, -- JSON of the customer billing address
    delivery            TEXT, -- JSON of the delivery details
    reassigned_from     TEXT,
    reassigned_order_id TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX orders_client ON orders (client_id, seq);
CREATE INDEX orders_number ON orders (client_id, order_number);

CREATE TABLE order_items (
    item_id                    TEXT PRIMARY KEY,
    order_id                   TEXT NOT NULL REFERENCES orders (id),
    pos                        INTEGER NOT NULL,
    client_id                  TEXT NOT NULL,
    store_id                   TEXT,
    ean                        TEXT NOT NULL,
    price                      INTEGER NOT NULL,
    currency                   TEXT NOT NULL,
    article_number             TEXT NOT NULL,
    marketplace_article_number TEXT NOT NULL,
    article_location           TEXT NOT NULL DEFAULT '',
    status                     TEXT NOT NULL CHECK (status IN ('assigned', 'cancelled', 'fulfilled', 'returned')),
    cancellation_reason        TEXT NOT NULL DEFAULT '' CHECK (cancellation_reason IN ('', 'ITEM_BROKEN', 'ITEM_MISSING', 'OUT_OF_STOCK', 'UNKNOWN_REASON')),
    return_reason_code         INTEGER CHECK (return_reason_code IS NULL OR return_reason_code BETWEEN 1 AND 10 OR return_reason_code = -1),
    return_location            TEXT NOT NULL DEFAULT '' CHECK (return_location IN ('', 'STORE', 'MARKETPLACE')),
    return_store_id            TEXT NOT NULL DEFAULT '',
    -- 1 while the unit holds stock at its store (docs/orders.md: stock reserved by orders).
    reserving                  INTEGER NOT NULL DEFAULT 0 CHECK (reserving IN (0, 1))
);
CREATE INDEX order_items_order ON order_items (order_id, pos);
CREATE INDEX order_items_reserving ON order_items (client_id, store_id, ean) WHERE reserving = 1;

-- The events, in the order they happened: seq is a client's cursor. payload
-- is the exact JSON partners receive.
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    client_id  TEXT NOT NULL REFERENCES clients (id),
    order_id   TEXT NOT NULL REFERENCES orders (id),
    state      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX events_client ON events (client_id, seq);
CREATE INDEX events_order ON events (order_id, seq);

-- +goose Down
DROP TABLE events;
DROP TABLE order_items;
DROP TABLE orders;
