-- Private asset review: one reusable record per tenant (user), channel and
-- asset (its full URL, or "sha256:<hex>" of decoded inline content). Tasks
-- that need the same asset on the same channel share the record, so one
-- preparation serves concurrent requests; records unused for the retention
-- period (default 60 days) are deleted with their stored copy.

-- +goose Up
CREATE TABLE review_assets (
    user_id      BIGINT NOT NULL,
    channel      TEXT   NOT NULL,
    asset_type   TEXT   NOT NULL,
    asset_key    TEXT   NOT NULL,
    state        TEXT   NOT NULL,
    blob_key     TEXT   NOT NULL DEFAULT '',
    prepared_at  BIGINT NOT NULL,
    decided_at   BIGINT NOT NULL DEFAULT 0,
    last_used_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, channel, asset_type, asset_key)
);
CREATE INDEX review_assets_last_used ON review_assets (last_used_at);

-- +goose Down
DROP INDEX review_assets_last_used;
DROP TABLE review_assets;
