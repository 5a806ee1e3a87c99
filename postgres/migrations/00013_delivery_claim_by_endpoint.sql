-- A delivery claim reads each endpoint's due deliveries in the order it
-- takes them, and stops once it has the endpoint's share
-- (deliveries_endpoint_due), and counts each endpoint's deliveries in flight
-- from the few that are leased (deliveries_leased), rather than reading the
-- whole backlog of pending deliveries at each claim.

-- +goose Up
CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at, event_seq) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (endpoint_id, lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;

-- +goose Down
DROP INDEX deliveries_leased;
DROP INDEX deliveries_endpoint_due;
