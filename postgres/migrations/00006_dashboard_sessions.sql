-- The operator dashboard's sessions, so that a logout ends one for good in
-- every process sharing the database and across restarts. id_hash is the
-- SHA-256 of the session id; the id itself is only ever in the browser's
-- signed cookie. Expired rows are deleted by the logins that write new ones
-- (dashboard_sessions_expires finds them).

-- +goose Up
CREATE TABLE dashboard_sessions (
    id_hash    bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expires ON dashboard_sessions (expires_at);

-- +goose Down
DROP TABLE dashboard_sessions;
