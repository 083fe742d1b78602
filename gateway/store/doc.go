// Package store is the ledger: tenants, tokens, grants, quota reservations,
// leases and usage rows in one SQL schema served by PostgreSQL (pgx) or
// SQLite (pure-Go modernc.org/sqlite). Open applies the embedded migrations.
//
// Callers:
//
//   - Tenant controller: EnsureTenant → user ID, ApplyGrant (exactly once per
//     grant ID), SetTenantUnlimited, TenantBalance for status.
//   - ApiToken controller: EnsureToken → token ID (the first registration's
//     starting balance and limits stay), UpdateTokenLimits, TokenUsage for
//     status. The gateway's authenticator and POST /v1/tokens may register
//     a token first; all three build the TokenSpec with tokenspec.For.
//   - Gateway hot path: a Leaser per replica (Reserve, Settle, Release; no
//     I/O in steady state), usage rows through gateway/usagelog, which calls
//     InsertUsage. The Charge returned by Leaser.Settle goes on the row.
//   - Asynchronous tasks and anything that must survive a restart between
//     reserve and settle: Reserve, Settle, Refund by request ID.
//   - Cluster-wide rate limits (gateway/ratelimit on PostgreSQL):
//     LeaseRateWindow, a share of a subject's minute window per call, in
//     chunks, never one call per request.
//   - Housekeeping (gateway/housekeeping, on the manager's leader):
//     SweepExpiredLeases, RefundStale, DeleteRateWindows.
//   - Usage endpoints: ListUsage, SummarizeUsage (ErrInvalidQuery → 422,
//     ErrQueryTimeout → 503).
//   - Console: UsageSeries for a tenant's charts; PlatformSeries and
//     PlatformTotals, every tenant's usage together, for the platform
//     overview.
//
// All money is billing.Quota. Lock order in every transaction is reservation
// → token → tenant → lease, so concurrent transactions never deadlock.
// docs/billing.md explains the phases, the lease design and its invariant.
package store
