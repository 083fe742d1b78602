-- Files of the Files API (POST /v1/files) and the result files a batch
-- writes: the record of a blob a tenant owns, listed newest first by
-- (user_id, created_at, id), and deleted with its blob after expires_at.

-- +goose Up
CREATE TABLE files (
    id         TEXT   PRIMARY KEY,
    user_id    BIGINT NOT NULL,
    token_id   BIGINT NOT NULL DEFAULT 0,
    purpose    TEXT   NOT NULL,
    filename   TEXT   NOT NULL,
    bytes      BIGINT NOT NULL,
    blob_key   TEXT   NOT NULL,
    status     TEXT   NOT NULL DEFAULT 'processed',
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX files_user_time ON files (user_id, created_at, id);
CREATE INDEX files_expiry ON files (expires_at);

-- +goose Down
DROP TABLE files;
