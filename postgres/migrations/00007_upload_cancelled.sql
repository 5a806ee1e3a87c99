-- An upload may be cancelled by its client while it is still accepted.

-- +goose Up
ALTER TABLE uploads DROP CONSTRAINT uploads_status_check;
ALTER TABLE uploads ADD CONSTRAINT uploads_status_check
    CHECK (status IN ('accepted', 'processing', 'applied', 'rejected', 'cancelled'));

-- +goose Down
UPDATE uploads SET status = 'rejected' WHERE status = 'cancelled';
ALTER TABLE uploads DROP CONSTRAINT uploads_status_check;
ALTER TABLE uploads ADD CONSTRAINT uploads_status_check
    CHECK (status IN ('accepted', 'processing', 'applied', 'rejected'));
