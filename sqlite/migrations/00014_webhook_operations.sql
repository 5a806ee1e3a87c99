-- Webhook operations (issue 16): endpoints can be deleted, a delivery can
-- be cancelled, every attempt keeps the URL it went to, and an endpoint's
-- health is read from its attempts; the operator's lists of partners and
-- clients page by their sort keys.
--
-- deliveries is rebuilt, as SQLite cannot change a CHECK constraint in
-- place, to allow the fourth state, 'cancelled' (the pending deliveries of
-- a deleted endpoint). Its rows, seqs and indexes are kept as they were;
-- deliveries_failed_endpoint finds the failed deliveries of an endpoint
-- (its stats, and a recovery), and is written only when a delivery fails.
--
-- delivery_attempts gains the URL the attempt went to (empty for older
-- attempts: where they went was not kept), its endpoint and whether it
-- succeeded (older attempts: 2xx without an error, as the deliverer
-- decided then), and delivery_attempts_endpoint, which covers an
-- endpoint's stats: its attempts since a time by outcome with their
-- durations, and its last success and failure, without reading a row.

-- +goose Up
CREATE TABLE deliveries_cancellable (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    event_id        TEXT NOT NULL REFERENCES events (id),
    event_seq       INTEGER NOT NULL,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints (id),
    client_id       TEXT NOT NULL,
    order_id        TEXT NOT NULL,
    event_state     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed', 'cancelled')),
    attempts        INTEGER NOT NULL DEFAULT 0, -- all attempts, numbering them
    tries           INTEGER NOT NULL DEFAULT 0, -- attempts since created or redelivered: the retry schedule's step
    next_attempt_at INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
INSERT INTO deliveries_cancellable (seq, id, event_id, event_seq, endpoint_id, client_id, order_id, event_state, state, attempts, tries,
    next_attempt_at, lease_owner, lease_until, created_at, updated_at)
SELECT seq, id, event_id, event_seq, endpoint_id, client_id, order_id, event_state, state, attempts, tries,
    next_attempt_at, lease_owner, lease_until, created_at, updated_at FROM deliveries;
-- The sequence goes on from where the old table's was.
DELETE FROM sqlite_sequence WHERE name = 'deliveries_cancellable';
INSERT INTO sqlite_sequence (name, seq) SELECT 'deliveries_cancellable', seq FROM sqlite_sequence WHERE name = 'deliveries';
DROP TABLE deliveries;
ALTER TABLE deliveries_cancellable RENAME TO deliveries;
CREATE INDEX deliveries_client ON deliveries (client_id, seq);
CREATE INDEX deliveries_failed ON deliveries (seq) WHERE state = 'failed';
CREATE INDEX deliveries_pending ON deliveries (seq) WHERE state = 'pending';
CREATE INDEX deliveries_failed_endpoint ON deliveries (endpoint_id, seq) WHERE state = 'failed';

ALTER TABLE endpoints ADD COLUMN deleted_at INTEGER;

ALTER TABLE delivery_attempts ADD COLUMN url TEXT NOT NULL DEFAULT '';
ALTER TABLE delivery_attempts ADD COLUMN endpoint_id TEXT NOT NULL DEFAULT '';
ALTER TABLE delivery_attempts ADD COLUMN succeeded INTEGER NOT NULL DEFAULT 0 CHECK (succeeded IN (0, 1));
UPDATE delivery_attempts SET endpoint_id = d.endpoint_id,
    succeeded = (coalesce(delivery_attempts.status_code, 0) BETWEEN 200 AND 299 AND delivery_attempts.error = '')
FROM deliveries d WHERE d.id = delivery_attempts.delivery_id;
CREATE INDEX delivery_attempts_endpoint ON delivery_attempts (endpoint_id, succeeded, at, duration_ms);

CREATE INDEX partners_name ON partners (name, id);

-- +goose Down
DROP INDEX partners_name;
DROP INDEX delivery_attempts_endpoint;
ALTER TABLE delivery_attempts DROP COLUMN succeeded;
ALTER TABLE delivery_attempts DROP COLUMN endpoint_id;
ALTER TABLE delivery_attempts DROP COLUMN url;
ALTER TABLE endpoints DROP COLUMN deleted_at;

-- Cancelled deliveries were pending when their endpoint was deleted; the
-- endpoint is disabled, so they wait there, unsent.
CREATE TABLE deliveries_uncancellable (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    event_id        TEXT NOT NULL REFERENCES events (id),
    event_seq       INTEGER NOT NULL,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints (id),
    client_id       TEXT NOT NULL,
    order_id        TEXT NOT NULL,
    event_state     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    tries           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
INSERT INTO deliveries_uncancellable (seq, id, event_id, event_seq, endpoint_id, client_id, order_id, event_state, state, attempts, tries,
    next_attempt_at, lease_owner, lease_until, created_at, updated_at)
SELECT seq, id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
    CASE state WHEN 'cancelled' THEN 'pending' ELSE state END, attempts, tries,
    CASE state WHEN 'cancelled' THEN updated_at ELSE next_attempt_at END, lease_owner, lease_until, created_at, updated_at FROM deliveries;
DELETE FROM sqlite_sequence WHERE name = 'deliveries_uncancellable';
INSERT INTO sqlite_sequence (name, seq) SELECT 'deliveries_uncancellable', seq FROM sqlite_sequence WHERE name = 'deliveries';
DROP TABLE deliveries;
ALTER TABLE deliveries_uncancellable RENAME TO deliveries;
CREATE INDEX deliveries_client ON deliveries (client_id, seq);
CREATE INDEX deliveries_failed ON deliveries (seq) WHERE state = 'failed';
CREATE INDEX deliveries_pending ON deliveries (seq) WHERE state = 'pending';
