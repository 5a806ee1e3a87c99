-- The claim finds an endpoint's earliest due delivery in
-- deliveries_endpoint_due, and nothing else reads pending deliveries by
-- their due time alone. deliveries_due cost two entries for each delivery
-- (written pending, then leased), and the planner could take it for the
-- claim's look at each endpoint, filtering its entries by endpoint: every
-- pending delivery read again for each endpoint that has none due.

-- +goose Up
DROP INDEX deliveries_due;

-- +goose Down
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
