-- The balance mirrors (TokenLeased, TenantLeased: every key and tenant each
-- sync period) and deletions look leases up by token and by tenant; without
-- these indexes each lookup scanned every lease.

-- +goose Up
CREATE INDEX leases_token ON leases (token_id);
CREATE INDEX leases_user ON leases (user_id);

-- +goose Down
DROP INDEX leases_user;
DROP INDEX leases_token;
