-- Upload records own a blob: the key that token made it with, where the
-- object lives, and when the cleanup job may delete both.

-- +goose Up
ALTER TABLE uploads ADD COLUMN token_id   BIGINT NOT NULL DEFAULT 0;
ALTER TABLE uploads ADD COLUMN blob_key   TEXT   NOT NULL DEFAULT '';
ALTER TABLE uploads ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX uploads_expiry ON uploads (expires_at);
CREATE INDEX uploads_user_time ON uploads (user_id, created_at);

-- +goose Down
DROP INDEX uploads_user_time;
DROP INDEX uploads_expiry;
ALTER TABLE uploads DROP COLUMN expires_at;
ALTER TABLE uploads DROP COLUMN blob_key;
ALTER TABLE uploads DROP COLUMN token_id;
