-- A partner's own note on an endpoint ("orders to the ERP", "staging"),
-- shown with it; '' for none.

-- +goose Up
ALTER TABLE endpoints ADD COLUMN description text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE endpoints DROP COLUMN description;
