-- Deliveries in flight are leased in memory (sqlite.leaseBook), not in
-- the file: only one process can hold the file, so a lease written there
-- was only ever read by the process that wrote it. The index of leased
-- deliveries goes; lease_owner and lease_until stay, unused and NULL (a
-- column cannot be dropped without rebuilding the table, and a file of an
-- earlier version may still hold leases, which start-up clears).

-- +goose Up
DROP INDEX deliveries_leased;

-- +goose Down
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;
