-- Webhook operations (issue 16): endpoints can be deleted, a delivery can
-- be cancelled (the pending deliveries of a deleted endpoint), every attempt
-- keeps the URL it went to, and an endpoint's health is read from its
-- attempts; the operator's lists of partners and clients page by their
-- sort keys, bytewise.
--
-- delivery_attempts gains the URL (empty for older attempts: where they
-- went was not kept), its endpoint and whether it succeeded (older
-- attempts: 2xx without an error, as the deliverer decided then);
-- delivery_attempts_endpoint covers an endpoint's stats without reading a
-- row. deliveries_failed_endpoint finds an endpoint's failed deliveries
-- (its stats, and a recovery) and is written only when a delivery fails;
-- its pending ones are found by deliveries_order.

-- +goose Up
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check CHECK (state IN ('pending', 'succeeded', 'failed', 'cancelled'));
CREATE INDEX deliveries_failed_endpoint ON deliveries (endpoint_id, seq) WHERE state = 'failed';

ALTER TABLE endpoints ADD COLUMN deleted_at timestamptz;

ALTER TABLE delivery_attempts ADD COLUMN url text NOT NULL DEFAULT '';
ALTER TABLE delivery_attempts ADD COLUMN endpoint_id text NOT NULL DEFAULT '';
ALTER TABLE delivery_attempts ADD COLUMN succeeded boolean NOT NULL DEFAULT false;
UPDATE delivery_attempts a SET endpoint_id = d.endpoint_id,
    succeeded = (coalesce(a.status_code, 0) BETWEEN 200 AND 299 AND a.error = '')
FROM deliveries d WHERE d.id = a.delivery_id;
CREATE INDEX delivery_attempts_endpoint ON delivery_attempts (endpoint_id, succeeded, at) INCLUDE (duration_ms);

CREATE INDEX partners_name ON partners (name COLLATE "C", id COLLATE "C");
CREATE INDEX clients_partner ON clients (partner_id COLLATE "C", country_code COLLATE "C");

-- +goose Down
DROP INDEX clients_partner;
DROP INDEX partners_name;
DROP INDEX delivery_attempts_endpoint;
ALTER TABLE delivery_attempts DROP COLUMN succeeded;
ALTER TABLE delivery_attempts DROP COLUMN endpoint_id;
ALTER TABLE delivery_attempts DROP COLUMN url;
ALTER TABLE endpoints DROP COLUMN deleted_at;
DROP INDEX deliveries_failed_endpoint;
-- Cancelled deliveries were pending when their endpoint was deleted; the
-- endpoint is disabled, so they wait there, unsent.
UPDATE deliveries SET state = 'pending', next_attempt_at = updated_at WHERE state = 'cancelled';
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check CHECK (state IN ('pending', 'succeeded', 'failed'));
