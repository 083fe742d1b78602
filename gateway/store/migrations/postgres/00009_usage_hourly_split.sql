-- The hourly rollup splits in two: usage_hourly keeps (user, hour, key) and
-- usage_hourly_model takes (user, hour, model). Nothing reads the pair: the
-- summary sums by key, the console's chart splits by key or by model. Keyed
-- on the pair, the rollup had a row for every key and model a key used in
-- an hour (a batch of 5 000 rows of 1 000 keys and 100 models changed about
-- 4 900 rows of it); split, it has one per key and one per model, a batch
-- changes at most one row of each per key and per model (about 2 000 in that
-- batch), and a chart by model reads one row per model and hour instead of
-- one per key, model and hour. Both tables are built from the joint rollup,
-- which holds exactly what they need.

-- +goose Up
CREATE TABLE usage_hourly_key (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    token_id          BIGINT NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, token_id)
);

INSERT INTO usage_hourly_key (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, hour_start, token_id, SUM(request_count), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_hourly
GROUP BY user_id, hour_start, token_id;

CREATE TABLE usage_hourly_model (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    model_name        TEXT   NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, model_name)
);

INSERT INTO usage_hourly_model (user_id, hour_start, model_name, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, hour_start, model_name, SUM(request_count), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_hourly
GROUP BY user_id, hour_start, model_name;

DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_key RENAME TO usage_hourly;

-- +goose Down
-- The pair is rebuilt from usage_logs, which the rollup sums exactly (a row
-- and its rollup share a transaction; usage rows are never deleted; a held
-- reservation, pre_consumed, joins the rollup only when it settles).
CREATE TABLE usage_hourly_pair (
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

INSERT INTO usage_hourly_pair (user_id, hour_start, token_id, model_name, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, created_at - created_at % 3600, token_id, model_name, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_logs
WHERE billing_phase <> 'pre_consumed'
GROUP BY user_id, created_at - created_at % 3600, token_id, model_name;

DROP TABLE usage_hourly_model;
DROP TABLE usage_hourly;
ALTER TABLE usage_hourly_pair RENAME TO usage_hourly;
