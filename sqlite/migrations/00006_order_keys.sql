-- Idempotency keys of order creation (Idempotency-Key on POST /orders and
-- POST /warehouse-orders): each key of a client, the SHA-256 of the request
-- that first brought it and the order that request made. A row is written in
-- the transaction that writes its order, so there is never one without the
-- other. Keys are remembered for 24 hours; expired ones are deleted a few at
-- a time by the calls that write new ones (order_keys_created finds them).

-- +goose Up
CREATE TABLE order_keys (
    client_id       TEXT NOT NULL REFERENCES clients (id),
    idempotency_key TEXT NOT NULL,
    request_hash    BLOB NOT NULL,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (client_id, idempotency_key)
) WITHOUT ROWID;
CREATE INDEX order_keys_created ON order_keys (created_at);

-- +goose Down
DROP TABLE order_keys;
