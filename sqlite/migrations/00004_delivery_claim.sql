-- The deliveries in flight, for a claim to count them per endpoint without
-- reading every pending delivery: a backlog of 20,000 made each claim read
-- all of it (see ClaimDeliveries).

-- +goose Up
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;

-- +goose Down
DROP INDEX deliveries_leased;
