-- Hourly rollup of usage rows per user and token, maintained by InsertUsage
-- in the same transaction as the rows. The summary endpoint reads whole hours
-- from here and only the partial hours at the window's edges from usage_logs,
-- so a 31-day summary reads about 744 rows per token instead of every request.

-- +goose Up
CREATE TABLE usage_hourly (
    user_id           BIGINT NOT NULL,
    hour_start        BIGINT NOT NULL,
    token_id          BIGINT NOT NULL,
    request_count     BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    quota             BIGINT NOT NULL,
    PRIMARY KEY (user_id, hour_start, token_id)
);

INSERT INTO usage_hourly (user_id, hour_start, token_id, request_count, prompt_tokens, completion_tokens, quota)
SELECT user_id, created_at - created_at % 3600, token_id, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(quota)
FROM usage_logs
GROUP BY user_id, created_at - created_at % 3600, token_id;

-- +goose Down
DROP TABLE usage_hourly;
