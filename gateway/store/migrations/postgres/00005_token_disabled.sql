-- A deleted ApiToken (or a key of a deleted Tenant) is disabled in the
-- ledger: it reserves nothing more, while its in-flight requests still
-- settle and its usage rows stay.

-- +goose Up
ALTER TABLE tokens ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE tokens DROP COLUMN disabled;
