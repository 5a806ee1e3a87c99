-- Orders, their items (one row per unit) and the order events.

-- +goose Up
CREATE TABLE orders (
    seq                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                  text NOT NULL UNIQUE,
    client_id           text NOT NULL REFERENCES clients (id),
    order_number        text NOT NULL,
    store_id            text, -- NULL for orders of the marketplace warehouse
    state               text NOT NULL CHECK (state IN ('assigned', 'cancelled', 'fulfilled', 'returned',
                            'marketplace_warehouse_fulfilled', 'marketplace_warehouse_returned')),
    billing             jsonb, -- the customer billing address
    delivery            jsonb, -- the delivery details
    reassigned_from     text,
    reassigned_order_id text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);
CREATE INDEX orders_client ON orders (client_id, seq);
CREATE INDEX orders_number ON orders (client_id, order_number);

CREATE TABLE order_items (
    item_id                    text PRIMARY KEY,
    order_id                   text NOT NULL REFERENCES orders (id),
    pos                        integer NOT NULL,
    client_id                  text NOT NULL,
    store_id                   text,
    ean                        text NOT NULL,
    price                      bigint NOT NULL,
    currency                   text NOT NULL,
    article_number             text NOT NULL,
    marketplace_article_number text NOT NULL,
    article_location           text NOT NULL DEFAULT '',
    status                     text NOT NULL CHECK (status IN ('assigned', 'cancelled', 'fulfilled', 'returned')),
    cancellation_reason        text NOT NULL DEFAULT '' CHECK (cancellation_reason IN ('', 'ITEM_BROKEN', 'ITEM_MISSING', 'OUT_OF_STOCK', 'UNKNOWN_REASON')),
    return_reason_code         integer CHECK (return_reason_code IS NULL OR return_reason_code BETWEEN 1 AND 10 OR return_reason_code = -1),
    return_location            text NOT NULL DEFAULT '' CHECK (return_location IN ('', 'STORE', 'MARKETPLACE')),
    return_store_id            text NOT NULL DEFAULT '',
    -- true while the unit holds stock at its store (docs/orders.md: stock reserved by orders).
    reserving                  boolean NOT NULL DEFAULT false
);
CREATE INDEX order_items_order ON order_items (order_id, pos);
CREATE INDEX order_items_reserving ON order_items (client_id, store_id, ean) WHERE reserving;

-- The last event number of each client. The transaction that writes an
-- event takes the next number by updating this row, which it then holds
-- until it commits: a client's events are numbered in commit order, so a
-- reader paging by number never skips an event that commits late (a global
-- sequence would allow that: numbers are taken in one order, committed in
-- another).
CREATE TABLE event_counters (
    client_id text PRIMARY KEY REFERENCES clients (id),
    last_seq  bigint NOT NULL
);

-- The events; seq is the number among the client's events and its cursor.
-- payload is the exact JSON partners receive (text, not jsonb, which would
-- reorder and respace it).
CREATE TABLE events (
    client_id  text NOT NULL REFERENCES clients (id),
    seq        bigint NOT NULL,
    id         text NOT NULL UNIQUE,
    order_id   text NOT NULL REFERENCES orders (id),
    state      text NOT NULL,
    payload    text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (client_id, seq)
);
CREATE INDEX events_order ON events (order_id, seq);

-- +goose Down
DROP TABLE events;
DROP TABLE event_counters;
DROP TABLE order_items;
DROP TABLE orders;
