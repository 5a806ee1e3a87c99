-- An upload that ends tells the endpoints of its client that ask for it
-- (stock_upload.finished): its event is an event that is no order's.
--
-- events is rebuilt, as SQLite cannot drop a NOT NULL in place, so that
-- order_id may be NULL: an upload's event belongs to no order but to its
-- upload, upload_id (its deliveries go in order within the upload, whose
-- id their order_id holds). Its rows, seqs (the event feed's cursors) and indexes are kept
-- as they were. The deliveries refer to events, so the rebuild runs with
-- foreign keys off, on the one connection migrations use, in a
-- transaction of its own: the documented way (lang_altertable.html,
-- "Making Other Kinds Of Table Schema Changes"). Run again after a crash,
-- it rebuilds afresh.
--
-- uploads.event_due marks an upload whose event is to be written: set in
-- the transaction that ends the upload when an endpoint of its client asks
-- for it, cleared in the one that writes the event.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE events_any (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    client_id  TEXT NOT NULL REFERENCES clients (id),
    order_id   TEXT REFERENCES orders (id), -- NULL for an upload's event
    upload_id  TEXT,                        -- an upload's event's upload
    state      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO events_any (seq, id, client_id, order_id, state, payload, created_at)
SELECT seq, id, client_id, order_id, state, payload, created_at FROM events;
DELETE FROM sqlite_sequence WHERE name = 'events_any';
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_any', seq FROM sqlite_sequence WHERE name = 'events';
DROP TABLE events;
ALTER TABLE events_any RENAME TO events;
CREATE INDEX events_client ON events (client_id, seq);
CREATE INDEX events_order ON events (order_id, seq);
ALTER TABLE uploads ADD COLUMN event_due INTEGER NOT NULL DEFAULT 0 CHECK (event_due IN (0, 1));
CREATE INDEX uploads_event_due ON uploads (seq) WHERE event_due = 1;
COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
DROP INDEX uploads_event_due;
ALTER TABLE uploads DROP COLUMN event_due;
DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.order_id IS NULL);
DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE order_id IS NULL);
CREATE TABLE events_of_orders (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    client_id  TEXT NOT NULL REFERENCES clients (id),
    order_id   TEXT NOT NULL REFERENCES orders (id),
    state      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO events_of_orders (seq, id, client_id, order_id, state, payload, created_at)
SELECT seq, id, client_id, order_id, state, payload, created_at FROM events WHERE order_id IS NOT NULL;
DELETE FROM sqlite_sequence WHERE name = 'events_of_orders';
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_of_orders', seq FROM sqlite_sequence WHERE name = 'events';
DROP TABLE events;
ALTER TABLE events_of_orders RENAME TO events;
CREATE INDEX events_client ON events (client_id, seq);
CREATE INDEX events_order ON events (order_id, seq);
COMMIT;
PRAGMA foreign_keys = ON;
