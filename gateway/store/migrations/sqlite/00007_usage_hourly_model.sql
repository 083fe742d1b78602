-- The hourly rollup gains the model: the console charts usage per hour or
-- day split by model as well as by key, and both come from this table (a
-- 31-day chart reads at most 744 rows per key and model, never the rows).
-- The new table is rebuilt from usage_logs, which the rollup has always
-- summed exactly (both are written in one transaction, and usage rows are
-- never deleted).

-- +goose Up
CREATE TABLE usage_hourly_by_model (
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

INSERT INTO usage_hourly_by_model (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, created_at - created_at % 3600, token_id, model_name, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_logs
GROUP BY user_id, created_at - created_at % 3600, token_id, model_name;

DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_by_model RENAME TO usage_hourly;

-- +goose Down
CREATE TABLE usage_hourly_by_token (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    token_id          BIGINT NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, token_id)
);

INSERT INTO usage_hourly_by_token (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, hour_start, token_id, SUM(request_count), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_hourly
GROUP BY user_id, hour_start, token_id;

DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_by_token RENAME TO usage_hourly;
