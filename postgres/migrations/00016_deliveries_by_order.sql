-- A partner lists the deliveries of one order, order number or event
-- (GET /webhooks/{client}/deliveries?order_id=…): they are read by their
-- order, a few rows per event and endpoint, whatever their state.

-- +goose Up
CREATE INDEX deliveries_order_seq ON deliveries (order_id, seq);

-- +goose Down
DROP INDEX deliveries_order_seq;
