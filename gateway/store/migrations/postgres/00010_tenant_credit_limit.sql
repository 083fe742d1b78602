-- A tenant's credit line: its balance may go down to -credit_limit, and
-- reservations are checked against remain_quota + credit_limit.

-- +goose Up
ALTER TABLE tenants ADD COLUMN credit_limit BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE tenants DROP COLUMN credit_limit;
