-- usage_logs becomes range-partitioned by month of created_at (Unix seconds),
-- so retention drops a whole month instead of deleting its rows one batch at
-- a time. The existing table is not copied: it is renamed to
-- usage_logs_legacy and attached as the partition of everything before the
-- start of next month; new months get partitions of their own, made ahead
-- of time by housekeeping (Store.EnsurePartitions).
--
-- A partitioned table cannot have a unique index without its partition key,
-- so request IDs stay unique through usage_request_ids, which InsertUsage
-- writes in the same statement as the rows. It is filled here from the rows
-- present.
--
-- Locks: the rename takes an ACCESS EXCLUSIVE lock on usage_logs that is
-- held until this migration commits, so usage writes wait for it. No row is
-- rewritten: the CHECK constraint is added NOT VALID and validated (one
-- sequential read), after which ATTACH PARTITION skips its own scan; the
-- existing indexes are attached to the parent's, not rebuilt. The longest
-- step is copying the request IDs (an index build over them).

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    bound BIGINT := extract(epoch FROM date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::bigint;
    next_log BIGINT;
BEGIN
    ALTER TABLE usage_logs RENAME TO usage_logs_legacy;
    ALTER INDEX usage_logs_user_time RENAME TO usage_logs_legacy_user_time;
    ALTER INDEX usage_logs_user_token_time RENAME TO usage_logs_legacy_user_token_time;

    -- Log IDs go on from the old identity: a sequence the partitions share
    -- (PostgreSQL 15 has no identity columns on partitioned tables).
    SELECT COALESCE(MAX(log_id), 0) + 1 INTO next_log FROM usage_logs_legacy;
    CREATE SEQUENCE usage_log_ids AS BIGINT;
    PERFORM setval('usage_log_ids', next_log, false);
    ALTER TABLE usage_logs_legacy ALTER COLUMN log_id DROP IDENTITY;

    CREATE TABLE usage_logs (
        log_id                BIGINT NOT NULL DEFAULT nextval('usage_log_ids'),
        request_id            TEXT   NOT NULL,
        created_at            BIGINT NOT NULL,
        user_id               BIGINT NOT NULL,
        token_id              BIGINT NOT NULL,
        token_name            TEXT   NOT NULL,
        model_name            TEXT   NOT NULL,
        task_id               TEXT   NOT NULL DEFAULT '',
        prompt_tokens         BIGINT NOT NULL,
        completion_tokens     BIGINT NOT NULL,
        cache_tokens          BIGINT,
        cache_creation_tokens BIGINT,
        reported_total_tokens BIGINT,
        total_tokens          BIGINT NOT NULL,
        billing_phase         TEXT   NOT NULL,
        quota                 BIGINT NOT NULL,
        backend               TEXT   NOT NULL DEFAULT ''
    ) PARTITION BY RANGE (created_at);
    ALTER SEQUENCE usage_log_ids OWNED BY usage_logs.log_id;
    CREATE INDEX usage_logs_user_time ON usage_logs (user_id, created_at, log_id)
        INCLUDE (token_id, prompt_tokens, completion_tokens, quota);
    CREATE INDEX usage_logs_user_token_time ON usage_logs (user_id, token_id, created_at, log_id);
    -- Settling and refunding a task's row find it by request ID. ON ONLY:
    -- the legacy partition answers that from its unique index, and the
    -- partitions made later get this one.
    CREATE INDEX usage_logs_request ON ONLY usage_logs (request_id);

    EXECUTE format('ALTER TABLE usage_logs_legacy ADD CONSTRAINT usage_logs_legacy_bound CHECK (created_at < %s) NOT VALID', bound);
    ALTER TABLE usage_logs_legacy VALIDATE CONSTRAINT usage_logs_legacy_bound;
    EXECUTE format('ALTER TABLE usage_logs ATTACH PARTITION usage_logs_legacy FOR VALUES FROM (MINVALUE) TO (%s)', bound);
    ALTER TABLE usage_logs_legacy DROP CONSTRAINT usage_logs_legacy_bound;

    CREATE TABLE usage_request_ids (
        request_id TEXT   PRIMARY KEY,
        created_at BIGINT NOT NULL
    );
    INSERT INTO usage_request_ids (request_id, created_at) SELECT request_id, created_at FROM usage_logs_legacy;
    CREATE INDEX usage_request_ids_time ON usage_request_ids (created_at);

    -- Next month and the one after (this one is in the legacy partition), so
    -- writes never wait for housekeeping.
    FOR i IN 0..1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF usage_logs FOR VALUES FROM (%s) TO (%s)',
            'usage_logs_' || to_char(to_timestamp(bound) AT TIME ZONE 'UTC' + make_interval(months => i), 'YYYYMM'),
            extract(epoch FROM (to_timestamp(bound) AT TIME ZONE 'UTC' + make_interval(months => i)))::bigint,
            extract(epoch FROM (to_timestamp(bound) AT TIME ZONE 'UTC' + make_interval(months => i + 1)))::bigint);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    next_log BIGINT;
BEGIN
    SELECT COALESCE(MAX(log_id), 0) + 1 INTO next_log FROM usage_logs;
    CREATE TABLE usage_logs_flat (LIKE usage_logs INCLUDING DEFAULTS);
    INSERT INTO usage_logs_flat SELECT * FROM usage_logs;
    ALTER TABLE usage_logs_flat ALTER COLUMN log_id DROP DEFAULT;
    DROP TABLE usage_logs;
    DROP TABLE usage_request_ids;
    ALTER TABLE usage_logs_flat RENAME TO usage_logs;
    ALTER TABLE usage_logs ADD PRIMARY KEY (log_id);
    ALTER TABLE usage_logs ADD UNIQUE (request_id);
    ALTER TABLE usage_logs ALTER COLUMN log_id ADD GENERATED BY DEFAULT AS IDENTITY;
    PERFORM setval(pg_get_serial_sequence('usage_logs', 'log_id'), next_log, false);
    CREATE INDEX usage_logs_user_time ON usage_logs (user_id, created_at, log_id)
        INCLUDE (token_id, prompt_tokens, completion_tokens, quota);
    CREATE INDEX usage_logs_user_token_time ON usage_logs (user_id, token_id, created_at, log_id);
END
$$;
-- +goose StatementEnd
