-- The ledger schema for SQLite. Keep it in step with ../postgres/00001_ledger.sql:
-- the same tables, columns and meaning; only types and index options differ.
-- Money columns are BIGINT quota units (1 USD = 500000); times are Unix seconds.

-- +goose Up
CREATE TABLE ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE tenants (
    user_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    uid          TEXT    NOT NULL UNIQUE,
    namespace    TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    unlimited    BOOLEAN NOT NULL DEFAULT 0,
    remain_quota BIGINT  NOT NULL DEFAULT 0,
    used_quota   BIGINT  NOT NULL DEFAULT 0,
    created_at   BIGINT  NOT NULL
);

CREATE TABLE grants (
    user_id    BIGINT NOT NULL REFERENCES tenants (user_id),
    grant_id   TEXT   NOT NULL,
    amount     BIGINT NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, grant_id)
);

CREATE TABLE tokens (
    token_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    uid            TEXT    NOT NULL UNIQUE,
    user_id        BIGINT  NOT NULL REFERENCES tenants (user_id),
    name           TEXT    NOT NULL,
    unlimited      BOOLEAN NOT NULL DEFAULT 0,
    remain_quota   BIGINT  NOT NULL DEFAULT 0,
    used_quota     BIGINT  NOT NULL DEFAULT 0,
    daily_limit    BIGINT  NOT NULL DEFAULT 0,
    daily_used     BIGINT  NOT NULL DEFAULT 0,
    daily_start    BIGINT  NOT NULL DEFAULT 0,
    monthly_limit  BIGINT  NOT NULL DEFAULT 0,
    monthly_used   BIGINT  NOT NULL DEFAULT 0,
    monthly_start  BIGINT  NOT NULL DEFAULT 0,
    accessed_time  BIGINT  NOT NULL DEFAULT 0,
    created_time   BIGINT  NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE reservations (
    request_id    TEXT    PRIMARY KEY,
    token_id      BIGINT  NOT NULL,
    user_id       BIGINT  NOT NULL,
    amount        BIGINT  NOT NULL,
    state         TEXT    NOT NULL,
    debit_token   BOOLEAN NOT NULL DEFAULT 0,
    debit_tenant  BOOLEAN NOT NULL DEFAULT 0,
    daily_start   BIGINT  NOT NULL DEFAULT 0,
    monthly_start BIGINT  NOT NULL DEFAULT 0,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);
CREATE INDEX reservations_open ON reservations (state, created_at);

CREATE TABLE leases (
    lease_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    replica_id    TEXT    NOT NULL,
    token_id      BIGINT  NOT NULL,
    user_id       BIGINT  NOT NULL,
    remaining     BIGINT  NOT NULL,
    debit_token   BOOLEAN NOT NULL,
    debit_tenant  BOOLEAN NOT NULL,
    daily_start   BIGINT  NOT NULL,
    monthly_start BIGINT  NOT NULL,
    expires_at    BIGINT  NOT NULL,
    UNIQUE (replica_id, token_id)
);
CREATE INDEX leases_expiry ON leases (expires_at);

CREATE TABLE usage_logs (
    log_id                INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id            TEXT   NOT NULL UNIQUE,
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
);
-- Both usage endpoints filter by user and window; SQLite has no INCLUDE, so the
-- summary reads the table rows (fine for the embedded sizes SQLite serves).
CREATE INDEX usage_logs_user_time ON usage_logs (user_id, created_at, log_id);
CREATE INDEX usage_logs_user_token_time ON usage_logs (user_id, token_id, created_at, log_id);

CREATE TABLE tasks (
    task_id        TEXT   PRIMARY KEY,
    user_id        BIGINT NOT NULL,
    token_id       BIGINT NOT NULL,
    request_id     TEXT   NOT NULL,
    kind           TEXT   NOT NULL,
    model          TEXT   NOT NULL,
    status         TEXT   NOT NULL,
    billing_status TEXT   NOT NULL DEFAULT '',
    quota          BIGINT NOT NULL DEFAULT 0,
    client_business_id TEXT NOT NULL DEFAULT '',
    body           TEXT,
    created_at     BIGINT NOT NULL,
    completed_at   BIGINT
);
CREATE INDEX tasks_user_time ON tasks (user_id, created_at);

CREATE TABLE uploads (
    id         TEXT   PRIMARY KEY,
    user_id    BIGINT NOT NULL,
    url        TEXT   NOT NULL,
    mime_type  TEXT   NOT NULL,
    size       BIGINT NOT NULL,
    purpose    TEXT   NOT NULL DEFAULT 'generation',
    created_at BIGINT NOT NULL
);

CREATE TABLE responses (
    id         TEXT   PRIMARY KEY,
    user_id    BIGINT NOT NULL,
    model      TEXT   NOT NULL,
    state      TEXT  NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX responses_user_time ON responses (user_id, created_at);

-- +goose Down
DROP TABLE responses;
DROP TABLE uploads;
DROP TABLE tasks;
DROP TABLE usage_logs;
DROP TABLE leases;
DROP TABLE reservations;
DROP TABLE tokens;
DROP TABLE grants;
DROP TABLE tenants;
DROP TABLE ledger_meta;
