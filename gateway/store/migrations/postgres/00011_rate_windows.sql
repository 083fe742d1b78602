-- Cluster-wide rate limits: per subject (a key's or tenant's requests or
-- tokens) and minute window, how much of the limit the replicas have leased
-- between them. A replica leases shares of a window in chunks and counts
-- requests against its share in memory; the row is what keeps the shares of
-- all replicas within the limit.

-- +goose Up
CREATE TABLE rate_windows (
    subject      TEXT   NOT NULL,
    window_start BIGINT NOT NULL,
    granted      BIGINT NOT NULL,
    PRIMARY KEY (subject, window_start)
);
CREATE INDEX rate_windows_start ON rate_windows (window_start);

-- +goose Down
DROP TABLE rate_windows;
