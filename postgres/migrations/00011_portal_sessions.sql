-- The partner portal (issue 16): its sessions are kept beside the operator
-- dashboard's, in the same table. client_id names the client of a
-- partner's session (NULL: the operator's); key_hash is the hash of the API
-- key it was opened with, as api_keys keeps it, so that deleting the key
-- ends the session. The key itself is never stored.
--
-- uploads_rejected finds the uploads rejected since a time, for the
-- operator's overview of every client at once; it is written only when an
-- upload is rejected.

-- +goose Up
ALTER TABLE dashboard_sessions ADD COLUMN client_id text;
ALTER TABLE dashboard_sessions ADD COLUMN key_hash text;
CREATE INDEX uploads_rejected ON uploads (received_at, client_id) WHERE status = 'rejected';

-- +goose Down
DROP INDEX uploads_rejected;
-- A partner's session cannot outlive the column that tells it is one.
DELETE FROM dashboard_sessions WHERE client_id IS NOT NULL;
ALTER TABLE dashboard_sessions DROP COLUMN key_hash;
ALTER TABLE dashboard_sessions DROP COLUMN client_id;
