-- The queue of pending deliveries is held in memory (sqlite.deliveryQueue)
-- and read from the file at start-up, as only one process can hold the
-- file. A claim no longer walks the due deliveries in the file, nor looks
-- for an earlier event of the same order there: deliveries_due and
-- deliveries_order go, and with them two index entries written and removed
-- on each delivery's way through the queue (and the due one again on each
-- retry). What is left is one index of the pending deliveries, by seq: the
-- queue is read from it, and a listing of the pending deliveries, newest
-- first, reads it in order.

-- +goose Up
DROP INDEX deliveries_due;
DROP INDEX deliveries_order;
CREATE INDEX deliveries_pending ON deliveries (seq) WHERE state = 'pending';

-- +goose Down
DROP INDEX deliveries_pending;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_id, event_seq) WHERE state = 'pending';
