-- Webhook endpoints and the deliveries of events to them.

-- +goose Up
CREATE TABLE endpoints (
    id                    text PRIMARY KEY,
    client_id             text NOT NULL REFERENCES clients (id),
    url                   text NOT NULL,
    states                text[] NOT NULL DEFAULT '{}', -- empty: every state
    enabled               boolean NOT NULL DEFAULT true,
    disabled_reason       text NOT NULL DEFAULT '',
    api_key               text NOT NULL DEFAULT '', -- sealed (storelink.Sealer)
    secret                text NOT NULL,            -- sealed
    previous_secret       text NOT NULL DEFAULT '', -- sealed; signs too until previous_secret_until
    previous_secret_until timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);
CREATE INDEX endpoints_client ON endpoints (client_id);

-- A delivery is also its own queue entry: pending rows with next_attempt_at
-- are claimed with a lease. event_seq is the event's number among its
-- client's events, which orders the events of one order.
CREATE TABLE deliveries (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    event_id        text NOT NULL REFERENCES events (id),
    event_seq       bigint NOT NULL,
    endpoint_id     text NOT NULL REFERENCES endpoints (id),
    client_id       text NOT NULL,
    order_id        text NOT NULL,
    event_state     text NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        integer NOT NULL DEFAULT 0, -- all attempts, numbering them
    tries           integer NOT NULL DEFAULT 0, -- attempts since created or redelivered: the retry schedule's step
    next_attempt_at timestamptz,
    lease_owner     text,
    lease_until     timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_id, event_seq) WHERE state = 'pending';
CREATE INDEX deliveries_client ON deliveries (client_id, seq);
CREATE INDEX deliveries_state ON deliveries (state, seq);

CREATE TABLE delivery_attempts (
    delivery_id text NOT NULL REFERENCES deliveries (id),
    number      integer NOT NULL,
    at          timestamptz NOT NULL,
    duration_ms bigint NOT NULL,
    status_code integer,
    error       text NOT NULL DEFAULT '',
    response    text NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
);

-- +goose Down
DROP TABLE delivery_attempts;
DROP TABLE deliveries;
DROP TABLE endpoints;
