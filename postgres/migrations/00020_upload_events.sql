-- An upload that ends tells the endpoints of its client that ask for it
-- (stock_upload.finished): its event is an event that is no order's, so
-- events.order_id may be NULL, and upload_id names its upload (its
-- deliveries go in order within the upload, whose id their order_id
-- holds).
--
-- uploads.event_due marks an upload whose event is to be written: set in
-- the transaction that ends the upload when an endpoint of its client asks
-- for it, cleared in the one that writes the event.

-- +goose Up
ALTER TABLE events ALTER COLUMN order_id DROP NOT NULL;
ALTER TABLE events ADD COLUMN upload_id text;
ALTER TABLE uploads ADD COLUMN event_due boolean NOT NULL DEFAULT false;
CREATE INDEX uploads_event_due ON uploads (seq) WHERE event_due;

-- +goose Down
DROP INDEX uploads_event_due;
ALTER TABLE uploads DROP COLUMN event_due;
DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.order_id IS NULL);
DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE order_id IS NULL);
DELETE FROM events WHERE order_id IS NULL;
ALTER TABLE events DROP COLUMN upload_id;
ALTER TABLE events ALTER COLUMN order_id SET NOT NULL;
