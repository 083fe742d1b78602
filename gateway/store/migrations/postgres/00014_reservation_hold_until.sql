-- A reservation may be held past the stale-reservation sweep until
-- hold_until (unix seconds; 0 for none). A batch line submitted to an
-- upstream batch API can wait up to a day for its answer: the Batch
-- controller settles or refunds it, and RefundStale leaves it alone until
-- hold_until, after which it gives back the quota of a batch deleted
-- meanwhile.

-- +goose Up
ALTER TABLE reservations ADD COLUMN hold_until BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE reservations DROP COLUMN hold_until;
