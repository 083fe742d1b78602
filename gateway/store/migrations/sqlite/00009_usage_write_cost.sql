-- What a usage row costs the embedded ledger to write. The usage writer's
-- transaction changes one page of every B-tree a row lands in, and commits
-- (and later checkpoints) every page it changed: a row whose key lands at a
-- different place in a tree than the previous row's costs a page of its own.
--
-- * The hourly rollup becomes a WITHOUT ROWID table, clustered on its key:
--   an upsert finds and changes one tree instead of the key's index and then
--   the table row it points to (a second page per row, at a random place).
-- * usage_logs keeps one index for both usage endpoints instead of two:
--   (user_id, created_at, log_id) with token_id at its end. A key's filter is
--   read from the index entries, without the table. The dropped
--   (user_id, token_id, created_at, log_id) index put every row at its key's
--   place, a different page for each of a tenant's keys; the kept one grows
--   at one end per tenant. PostgreSQL, whose write cost is its own server's
--   and not the gateway's, keeps both.

-- +goose Up
CREATE TABLE usage_hourly_clustered (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    token_id          BIGINT NOT NULL,
    model_name        TEXT   NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, token_id, model_name)
) WITHOUT ROWID;

INSERT INTO usage_hourly_clustered (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota FROM usage_hourly;

DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_clustered RENAME TO usage_hourly;

DROP INDEX usage_logs_user_token_time;
DROP INDEX usage_logs_user_time;
CREATE INDEX usage_logs_user_time ON usage_logs (user_id, created_at, log_id, token_id);

-- +goose Down
CREATE TABLE usage_hourly_rowid (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    token_id          BIGINT NOT NULL,
    model_name        TEXT   NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, token_id, model_name)
);

INSERT INTO usage_hourly_rowid (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota FROM usage_hourly;

DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_rowid RENAME TO usage_hourly;

DROP INDEX usage_logs_user_time;
CREATE INDEX usage_logs_user_time ON usage_logs (user_id, created_at, log_id);
CREATE INDEX usage_logs_user_token_time ON usage_logs (user_id, token_id, created_at, log_id);
