-- A claim reads the due deliveries from the file again, rather than from a
-- queue held in memory: deliveries_due walks the pending deliveries by when
-- they are due (then seq, the rowid, which every index ends with), and
-- deliveries_order finds whether an earlier event of the same order is
-- pending to the same endpoint, which then goes first.

-- +goose Up
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_id, event_seq) WHERE state = 'pending';

-- +goose Down
DROP INDEX deliveries_order;
DROP INDEX deliveries_due;
