-- Webhook endpoints and the deliveries of events to them.

-- +goose Up
CREATE TABLE endpoints (
    id                    TEXT PRIMARY KEY,
    client_id             TEXT NOT NULL REFERENCES clients (id),
    url                   TEXT NOT NULL,
    states                TEXT NOT NULL DEFAULT '', -- comma-separated; '' is every state
    enabled               INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    disabled_reason       TEXT NOT NULL DEFAULT '',
    api_key               TEXT NOT NULL DEFAULT '', -- sealed (storelink.Sealer)
    secret                TEXT NOT NULL,            -- sealed
    previous_secret       TEXT NOT NULL DEFAULT '', -- sealed; signs too until previous_secret_until
    previous_secret_until INTEGER,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX endpoints_client ON endpoints (client_id);

-- A delivery is also its own queue entry: pending rows with next_attempt_at
-- are claimed with a lease. event_seq orders the events of one order.
CREATE TABLE deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    event_id        TEXT NOT NULL REFERENCES events (id),
    event_seq       INTEGER NOT NULL,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints (id),
    client_id       TEXT NOT NULL,
    order_id        TEXT NOT NULL,
    event_state     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0, -- all attempts, numbering them
    tries           INTEGER NOT NULL DEFAULT 0, -- attempts since created or redelivered: the retry schedule's step
    next_attempt_at INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_id, event_seq) WHERE state = 'pending';
CREATE INDEX deliveries_client ON deliveries (client_id, seq);
CREATE INDEX deliveries_state ON deliveries (state, seq);

CREATE TABLE delivery_attempts (
    delivery_id TEXT NOT NULL REFERENCES deliveries (id),
    number      INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status_code INTEGER,
    error       TEXT NOT NULL DEFAULT '',
    response    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
);

-- +goose Down
DROP TABLE delivery_attempts;
DROP TABLE deliveries;
DROP TABLE endpoints;
