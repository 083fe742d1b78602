package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Billing phases of a usage row (contract: billing_phase).
const (
	PhasePreConsumed = "pre_consumed"
	PhaseSettled     = "settled"
	PhaseUnknown     = "unknown"
)

// UsageRow is one billable request as the gateway records it. JSON tags
// define the usage writer's spool format; keep them stable.
type UsageRow struct {
	RequestID           string        `json:"request_id"`
	CreatedAt           int64         `json:"created_at"` // Unix seconds; 0 = now
	UserID              int64         `json:"user_id"`
	TokenID             int64         `json:"token_id"`
	TokenName           string        `json:"token_name"`
	ModelName           string        `json:"model_name"`
	TaskID              string        `json:"task_id,omitempty"`
	PromptTokens        int64         `json:"prompt_tokens"`
	CompletionTokens    int64         `json:"completion_tokens"`
	CacheTokens         *int64        `json:"cache_tokens,omitempty"`
	CacheCreationTokens *int64        `json:"cache_creation_tokens,omitempty"`
	ReportedTotalTokens *int64        `json:"reported_total_tokens,omitempty"`
	BillingPhase        string        `json:"billing_phase"`
	Quota               billing.Quota `json:"quota"`
	// Backend is the upstream that served the request. Stored for
	// operators; never returned by the usage queries.
	Backend string `json:"backend,omitempty"`
	// Charge says whether inserting the row charges its quota (lease path).
	Charge Charge `json:"charge"`
}

const usageInsertCols = `request_id, created_at, user_id, token_id, token_name, model_name, task_id, prompt_tokens,
	completion_tokens, cache_tokens, cache_creation_tokens, reported_total_tokens, total_tokens, billing_phase, quota, backend`

const usageColCount = 16

// InsertUsage writes rows in one transaction and returns how many were new.
// A row whose request ID is already present is skipped, so replaying a batch
// never duplicates a row nor charges twice. For new rows with Charge.Apply,
// the quota is charged in the same transaction: taken from the row's lease
// while it exists, else from the token's and tenant's balances.
func (s *Store) InsertUsage(ctx context.Context, rows []UsageRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	rows = s.withDefaults(rows)
	// Prepared outside the transaction; when that fails (database down) the
	// statements run unprepared, and most likely fail the same way.
	_ = s.stmts.prepare(ctx, s.db)
	inserted, err := s.insertUsage(ctx, rows, s.dialect == sqlite)
	if errors.Is(err, errPresentRequestID) {
		inserted, err = s.insertUsage(ctx, rows, false)
	}
	if isNoPartition(err) {
		// A month no partition covers yet (housekeeping has not run since
		// the clock reached it, or a row dated ahead): make it and retry.
		at := make([]int64, len(rows))
		for i, r := range rows {
			at[i] = r.CreatedAt
		}
		if err = s.ensureMonths(ctx, at); err == nil {
			inserted, err = s.insertUsage(ctx, rows, false)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("insert %d usage rows: %w", len(rows), err)
	}
	return inserted, nil
}

// errPresentRequestID is SQLite refusing an all-new insert (allNew) because
// a request ID is already in the ledger; the whole transaction was rolled
// back, and InsertUsage runs it again with the insert that skips such rows.
var errPresentRequestID = errors.New("a request ID is already in the ledger")

// insertUsage is InsertUsage's transaction. With allNew (SQLite), each chunk
// is inserted by a statement that fails on a present request ID, rolling
// back the whole transaction: a replay is rare, and a statement that can
// only fail whole needs no statement journal, which SQLite otherwise fills
// with every page the insert touches (about a tenth of its cost).
func (s *Store) insertUsage(ctx context.Context, rows []UsageRow, allNew bool) (int, error) {
	inserted := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		added, charged := make([]UsageRow, 0, len(rows)), make([]UsageRow, 0, len(rows))
		err := eachChunk(len(rows), func(lo, hi int) error {
			chunk := rows[lo:hi]
			fresh, err := s.insertUsageChunk(ctx, tx, chunk, allNew)
			if err != nil {
				return err
			}
			for _, r := range chunk {
				// delete: a request ID repeated inside one batch is inserted,
				// and so counted and charged, once.
				if !fresh.take(r.RequestID) {
					continue
				}
				added = append(added, r)
				if r.Charge.Apply {
					charged = append(charged, r)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		inserted = len(added)
		if err := s.applyCharges(ctx, tx, charged); err != nil {
			return err
		}
		return s.addHourly(ctx, tx, added)
	})
	return inserted, err
}

// RecordTaskUsage writes a task's usage row. A settled row replaces the
// task's pre_consumed row (its held reservation, listed while the task
// runs): same log ID, dated at billing, and counted in the hourly rollup
// only now. A pre_consumed row is written once; anything else is inserted
// as InsertUsage does. It reports whether the row was written.
func (s *Store) RecordTaskUsage(ctx context.Context, row UsageRow) (bool, error) {
	if row.BillingPhase == PhasePreConsumed || row.Charge.Apply {
		n, err := s.InsertUsage(ctx, []UsageRow{row})
		return n > 0, err
	}
	row = s.withDefaults([]UsageRow{row})[0]
	written := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE usage_logs SET created_at = ?, token_name = ?, prompt_tokens = ?,
			completion_tokens = ?, cache_tokens = ?, cache_creation_tokens = ?, reported_total_tokens = ?, total_tokens = ?,
			billing_phase = ?, quota = ?, backend = ?
			WHERE request_id = ? AND billing_phase = ?`),
			row.CreatedAt, row.TokenName, row.PromptTokens, row.CompletionTokens, row.CacheTokens, row.CacheCreationTokens,
			row.ReportedTotalTokens, row.PromptTokens+row.CompletionTokens, row.BillingPhase, int64(row.Quota), row.Backend,
			row.RequestID, PhasePreConsumed)
		if err != nil {
			return fmt.Errorf("settle pre-consumed usage row: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			fresh, err := s.insertUsageChunk(ctx, tx, []UsageRow{row}, false)
			if err != nil || !fresh.take(row.RequestID) {
				return err
			}
		} else if s.dialect == postgres {
			// The claim expires with the row, now dated at billing.
			if _, err := tx.ExecContext(ctx, `UPDATE usage_request_ids SET created_at = $1 WHERE request_id = $2`,
				row.CreatedAt, row.RequestID); err != nil {
				return fmt.Errorf("settle pre-consumed usage row: %w", err)
			}
		}
		written = true
		return s.addHourly(ctx, tx, []UsageRow{row})
	})
	if err != nil {
		return false, fmt.Errorf("record usage of %s: %w", row.RequestID, err)
	}
	return written, nil
}

// withDefaults returns rows with a zero created_at set to now and an empty
// billing phase set to unknown (a row without the metadata, such as one
// spooled by an older gateway); the caller's slice is not modified.
func (s *Store) withDefaults(rows []UsageRow) []UsageRow {
	now := s.now()
	out := slices.Clone(rows)
	for i := range out {
		if out[i].CreatedAt == 0 {
			out[i].CreatedAt = now
		}
		if out[i].BillingPhase == "" {
			out[i].BillingPhase = PhaseUnknown
		}
	}
	return out
}

// usageQueries are the statements the usage writer prepares: each
// multi-row statement in every size of chunkSizes.
func (s *Store) usageQueries() []string {
	var qs []string
	for _, n := range chunkSizes {
		qs = append(qs, s.insertUsageSQL(n), s.drawLeasesSQL(n), s.hourlySQL(rollupByKey, n), s.hourlySQL(rollupByModel, n),
			s.lockFlagsSQL("tokens", "token_id", n), s.lockFlagsSQL("tenants", "user_id", n),
			s.addDeltasSQL("tokens", "token_id", n), s.addDeltasSQL("tenants", "user_id", n))
		if s.dialect == sqlite {
			qs = append(qs, s.insertNewUsageSQL(n))
		}
	}
	return qs
}

// rowsList is "(?,…,?),(…)": n rows of cols parameters.
func rowsList(n, cols int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// insertUsageSQL skips the rows whose request ID is present and returns
// the IDs of those it inserted.
//
// On PostgreSQL usage_logs is partitioned and cannot hold a unique index on
// request_id alone, so the statement first claims each ID in
// usage_request_ids and inserts only the rows whose claim is new: a
// concurrent writer of the same ID waits on the claim's unique index and
// then skips the row.
func (s *Store) insertUsageSQL(n int) string {
	if s.dialect == postgres {
		return s.q(`WITH v (` + usageInsertCols + `) AS (VALUES ` + typedRowsList(n) + `),
			claimed AS (INSERT INTO usage_request_ids (request_id, created_at) SELECT request_id, created_at FROM v
				ON CONFLICT (request_id) DO NOTHING RETURNING request_id)
			INSERT INTO usage_logs (` + usageInsertCols + `) SELECT ` + usageInsertCols + ` FROM v
			WHERE request_id IN (SELECT request_id FROM claimed) RETURNING request_id`)
	}
	return s.q(`INSERT INTO usage_logs (` + usageInsertCols + `) VALUES ` + rowsList(n, usageColCount) +
		` ON CONFLICT (request_id) DO NOTHING RETURNING request_id`)
}

// usageColTypes are the PostgreSQL types of usageInsertCols, in order: the
// VALUES of a CTE has no target columns to infer its parameters' types from.
var usageColTypes = [usageColCount]string{"text", "bigint", "bigint", "bigint", "text", "text", "text", "bigint",
	"bigint", "bigint", "bigint", "bigint", "bigint", "text", "bigint", "text"}

// typedRowsList is rowsList(n, usageColCount) with each parameter cast.
func typedRowsList(n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, t := range usageColTypes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("?::" + t)
	}
	b.WriteByte(')')
	row := b.String()
	return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// insertNewUsageSQL (SQLite) inserts n rows that are all new, or fails and
// rolls back the whole transaction: a present request ID (or any other
// violated constraint) ends it, so SQLite keeps no statement journal to back
// out the statement alone.
func (s *Store) insertNewUsageSQL(n int) string {
	return s.q(`INSERT OR ROLLBACK INTO usage_logs (` + usageInsertCols + `) VALUES ` + rowsList(n, usageColCount))
}

// freshIDs is what insertUsageChunk inserted: every row (all), or the
// request IDs in ids.
type freshIDs struct {
	all bool
	ids map[string]bool
}

// take reports whether the row with request ID id was inserted and is not
// taken yet. A chunk inserted whole holds no ID twice (the statement would
// have failed), so all needs no bookkeeping.
func (f freshIDs) take(id string) bool {
	if f.all {
		return true
	}
	if !f.ids[id] {
		return false
	}
	delete(f.ids, id)
	return true
}

// insertUsageChunk inserts the rows whose request ID is not in the ledger.
//
// With allNew (SQLite) it inserts the chunk as if every row were new: the
// usage writer's batches are, except when a journal is replayed, and the
// plain INSERT costs the writer less per row than the one that skips
// conflicts and returns what it inserted, and a statement that can only
// fail with its transaction (OR ROLLBACK) needs no statement journal, which
// SQLite would otherwise fill with every page the insert touches. A
// present request ID fails that statement and the whole
// transaction (errPresentRequestID), which InsertUsage then runs again the
// careful way. PostgreSQL always takes the careful way.
func (s *Store) insertUsageChunk(ctx context.Context, tx *sql.Tx, rows []UsageRow, allNew bool) (freshIDs, error) {
	if s.dialect == postgres {
		rows = firstOfEachID(rows)
	}
	args := make([]any, 0, len(rows)*usageColCount)
	for _, r := range rows {
		args = append(args, r.RequestID, r.CreatedAt, r.UserID, r.TokenID, r.TokenName, r.ModelName, r.TaskID,
			r.PromptTokens, r.CompletionTokens, r.CacheTokens, r.CacheCreationTokens, r.ReportedTotalTokens,
			r.PromptTokens+r.CompletionTokens, r.BillingPhase, int64(r.Quota), r.Backend)
	}
	if allNew {
		_, err := s.txExec(ctx, tx, s.insertNewUsageSQL(len(rows)), args...)
		switch {
		case err == nil:
			return freshIDs{all: true}, nil
		case isUniqueViolation(err):
			return freshIDs{}, errPresentRequestID
		default:
			return freshIDs{}, fmt.Errorf("insert usage: %w", err)
		}
	}
	res, err := s.txQuery(ctx, tx, s.insertUsageSQL(len(rows)), args...)
	if err != nil {
		return freshIDs{}, fmt.Errorf("insert usage: %w", err)
	}
	defer res.Close()
	fresh := freshIDs{ids: make(map[string]bool, len(rows))}
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return freshIDs{}, fmt.Errorf("insert usage: %w", err)
		}
		fresh.ids[id] = true
	}
	if err := res.Err(); err != nil {
		return freshIDs{}, fmt.Errorf("insert usage: %w", err)
	}
	return fresh, nil
}

// firstOfEachID drops the rows whose request ID an earlier row has, as a
// unique index would: usage_logs' claim in usage_request_ids covers IDs
// already stored, not two rows of one statement.
func firstOfEachID(rows []UsageRow) []UsageRow {
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		if seen[r.RequestID] {
			out := make([]UsageRow, 0, len(rows))
			clear(seen)
			for _, r := range rows {
				if !seen[r.RequestID] {
					seen[r.RequestID] = true
					out = append(out, r)
				}
			}
			return out
		}
		seen[r.RequestID] = true
	}
	return rows
}

// chargeKey groups charged rows by where their quota comes from.
type chargeKey struct{ leaseID, tokenID, userID int64 }

// applyCharges accounts the quota of newly inserted lease-path rows. Each
// table is updated with one statement per chunk of rows, not one per row.
//
// On PostgreSQL, row locks are taken tokens → tenants → leases, each in ID
// order, the same order as every other quota transaction (a lease row is
// only written under its token's lock, so the order among leases does not
// matter). SQLite runs one write transaction at a time, so there is no lock
// order to keep: it draws the leases first and reads the unlimited flags of
// only the keys no lease paid for, usually none, which saves a lookup of
// every token and tenant in the batch.
func (s *Store) applyCharges(ctx context.Context, tx *sql.Tx, rows []UsageRow) error {
	if len(rows) == 0 {
		return nil
	}
	sums := map[chargeKey]int64{}
	draws := map[leaseKey]int64{}
	for _, r := range rows {
		sums[chargeKey{r.Charge.LeaseID, r.TokenID, r.UserID}] += int64(r.Quota)
		if r.Charge.LeaseID != 0 {
			draws[leaseKey{r.Charge.LeaseID, r.TokenID}] += int64(r.Quota)
		}
	}
	var flags balanceFlags
	var err error
	if s.dialect == postgres {
		if flags, err = s.lockBalances(ctx, tx, sums, nil); err != nil {
			return err
		}
	}
	drawn, err := s.drawLeases(ctx, tx, draws)
	if err != nil {
		return err
	}
	if s.dialect != postgres {
		if flags, err = s.lockBalances(ctx, tx, sums, drawn); err != nil {
			return err
		}
	}
	tokRemain, tokUsed := map[int64]int64{}, map[int64]int64{}
	tenRemain, tenUsed := map[int64]int64{}, map[int64]int64{}
	for k, q := range sums {
		tokUsed[k.tokenID] += q
		tenUsed[k.userID] += q
		if drawn[leaseKey{k.leaseID, k.tokenID}] {
			continue
		}
		// No lease (unbounded path, or the lease was returned or swept
		// before the row arrived): charge the balances directly.
		if !flags.token[k.tokenID] {
			tokRemain[k.tokenID] -= q
		}
		if !flags.tenant[k.userID] {
			tenRemain[k.userID] -= q
		}
	}
	return s.addBalances(ctx, tx, tokRemain, tokUsed, tenRemain, tenUsed)
}

// balanceFlags are the unlimited flags of tokens and tenants, by ID.
type balanceFlags struct{ token, tenant map[int64]bool }

// lockBalances locks the token and tenant rows of the charges in sums,
// except those drawn from a lease, and returns their unlimited flags.
func (s *Store) lockBalances(ctx context.Context, tx *sql.Tx, sums map[chargeKey]int64, drawn map[leaseKey]bool) (balanceFlags, error) {
	var tokenIDs, userIDs []int64
	for k := range sums {
		if !drawn[leaseKey{k.leaseID, k.tokenID}] {
			tokenIDs = append(tokenIDs, k.tokenID)
			userIDs = append(userIDs, k.userID)
		}
	}
	var f balanceFlags
	var err error
	if f.token, err = s.lockFlags(ctx, tx, "tokens", "token_id", tokenIDs); err != nil {
		return f, err
	}
	f.tenant, err = s.lockFlags(ctx, tx, "tenants", "user_id", userIDs)
	return f, err
}

// leaseKey is a lease and the token it must belong to.
type leaseKey struct{ leaseID, tokenID int64 }

// drawLeases takes each sum from its lease, if the lease still exists, and
// returns the leases it drew from.
func (s *Store) drawLeases(ctx context.Context, tx *sql.Tx, draws map[leaseKey]int64) (map[leaseKey]bool, error) {
	keys := make([]leaseKey, 0, len(draws))
	for k := range draws {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b leaseKey) int { return cmp.Compare(a.leaseID, b.leaseID) })
	drawn := make(map[leaseKey]bool, len(keys))
	err := eachChunk(len(keys), func(lo, hi int) error {
		chunk := keys[lo:hi]
		args := make([]any, 0, 3*len(chunk))
		for _, k := range chunk {
			args = append(args, k.leaseID, k.tokenID, draws[k])
		}
		rows, err := s.txQuery(ctx, tx, s.drawLeasesSQL(len(chunk)), args...)
		if err != nil {
			return fmt.Errorf("charge leases: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k leaseKey
			if err := rows.Scan(&k.leaseID, &k.tokenID); err != nil {
				return fmt.Errorf("charge leases: %w", err)
			}
			drawn[k] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("charge leases: %w", err)
		}
		return nil
	})
	return drawn, err
}

func (s *Store) drawLeasesSQL(n int) string {
	return s.q(`WITH v (lease_id, token_id, q) AS (VALUES ` + valuesList(n, 3) + `)
		UPDATE leases SET remaining = leases.remaining - v.q FROM v
		WHERE leases.lease_id = v.lease_id AND leases.token_id = v.token_id
		RETURNING leases.lease_id, leases.token_id`)
}

// valuesList is the body of a VALUES list of n rows of cols BIGINT
// parameters: "(CAST(? AS BIGINT), …), (…)". The casts type the parameters
// for PostgreSQL.
func valuesList(n, cols int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("CAST(? AS BIGINT),", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// lockFlags locks the rows of table with the given IDs (in ID order) and
// returns their unlimited flags. Missing rows are absent from the map.
func (s *Store) lockFlags(ctx context.Context, tx *sql.Tx, table, idCol string, ids []int64) (map[int64]bool, error) {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	flags := make(map[int64]bool, len(ids))
	// Chunks in ascending order keep the locks in ID order.
	err := eachChunk(len(ids), func(lo, hi int) error {
		args := make([]any, hi-lo)
		for i, id := range ids[lo:hi] {
			args[i] = id
		}
		rows, err := s.txQuery(ctx, tx, s.lockFlagsSQL(table, idCol, hi-lo), args...)
		if err != nil {
			return fmt.Errorf("lock %s: %w", table, err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var unlimited bool
			if err := rows.Scan(&id, &unlimited); err != nil {
				return fmt.Errorf("lock %s: %w", table, err)
			}
			flags[id] = unlimited
		}
		return rows.Err()
	})
	return flags, err
}

func (s *Store) lockFlagsSQL(table, idCol string, n int) string {
	marks := strings.TrimSuffix(strings.Repeat("?,", n), ",")
	return s.q(`SELECT ` + idCol + `, unlimited FROM ` + table + ` WHERE ` + idCol + ` IN (` + marks + `) ORDER BY ` + idCol + s.forUpdate())
}

// addBalances adds the remain and used deltas to tokens and tenants, one
// statement per table and chunk, in ID order.
func (s *Store) addBalances(ctx context.Context, tx *sql.Tx, tokRemain, tokUsed, tenRemain, tenUsed map[int64]int64) error {
	if err := s.addDeltas(ctx, tx, "tokens", "token_id", tokRemain, tokUsed); err != nil {
		return err
	}
	return s.addDeltas(ctx, tx, "tenants", "user_id", tenRemain, tenUsed)
}

// addDeltas runs remain_quota += remain[id], used_quota += used[id] on the
// rows of table whose idCol is a key of used.
func (s *Store) addDeltas(ctx context.Context, tx *sql.Tx, table, idCol string, remain, used map[int64]int64) error {
	ids := sortedKeys(used)
	return eachChunk(len(ids), func(lo, hi int) error {
		args := make([]any, 0, 3*(hi-lo))
		for _, id := range ids[lo:hi] {
			args = append(args, id, remain[id], used[id])
		}
		if _, err := s.txExec(ctx, tx, s.addDeltasSQL(table, idCol, hi-lo), args...); err != nil {
			return fmt.Errorf("charge %s: %w", table, err)
		}
		return nil
	})
}

func (s *Store) addDeltasSQL(table, idCol string, n int) string {
	return s.q(`WITH v (id, dr, du) AS (VALUES ` + valuesList(n, 3) + `)
		UPDATE ` + table + ` SET remain_quota = ` + table + `.remain_quota + v.dr, used_quota = ` + table + `.used_quota + v.du
		FROM v WHERE ` + table + `.` + idCol + ` = v.id`)
}

func sortedKeys(m map[int64]int64) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// The hourly rollup is two tables: usage_hourly by key and
// usage_hourly_model by model (SQLite migration 10, PostgreSQL 9). Nothing
// reads a key and a model together, and split, a batch changes one row per
// key and one per model instead of one per pair.
type rollup struct{ table, column string } // the table and its third key column

var (
	rollupByKey   = rollup{"usage_hourly", "token_id"}
	rollupByModel = rollup{"usage_hourly_model", "model_name"}
)

// hourKey is one row of a rollup: tenant, hour, and a key ID or a model.
type hourKey[T cmp.Ordered] struct {
	userID, hourStart int64
	of                T
}

type hourSums struct{ count, prompt, completion, quota int64 }

// addHourly adds newly inserted rows to both rollups. Every transaction
// writes the key rollup before the model one, each with upserts in
// primary-key order, so concurrent batches lock rollup rows in the same
// order.
func (s *Store) addHourly(ctx context.Context, tx *sql.Tx, rows []UsageRow) error {
	byKey, byModel := map[hourKey[int64]]hourSums{}, map[hourKey[string]]hourSums{}
	for _, r := range rows {
		if r.BillingPhase == PhasePreConsumed {
			continue // counted when it settles (RecordTaskUsage)
		}
		h := hourFloor(r.CreatedAt)
		addSums(byKey, hourKey[int64]{r.UserID, h, r.TokenID}, r)
		addSums(byModel, hourKey[string]{r.UserID, h, r.ModelName}, r)
	}
	if err := upsertHourly(ctx, s, tx, rollupByKey, byKey); err != nil {
		return err
	}
	return upsertHourly(ctx, s, tx, rollupByModel, byModel)
}

func addSums[T cmp.Ordered](sums map[hourKey[T]]hourSums, k hourKey[T], r UsageRow) {
	v := sums[k]
	v.count++
	v.prompt += r.PromptTokens
	v.completion += r.CompletionTokens
	v.quota += int64(r.Quota)
	sums[k] = v
}

func upsertHourly[T cmp.Ordered](ctx context.Context, s *Store, tx *sql.Tx, r rollup, sums map[hourKey[T]]hourSums) error {
	keys := slices.SortedFunc(maps.Keys(sums), func(a, b hourKey[T]) int {
		return cmp.Or(cmp.Compare(a.userID, b.userID), cmp.Compare(a.hourStart, b.hourStart), cmp.Compare(a.of, b.of))
	})
	return eachChunk(len(keys), func(lo, hi int) error {
		args := make([]any, 0, (hi-lo)*hourlyCols)
		for _, k := range keys[lo:hi] {
			v := sums[k]
			args = append(args, k.userID, k.hourStart, k.of, v.count, v.prompt, v.completion, v.quota)
		}
		if _, err := s.txExec(ctx, tx, s.hourlySQL(r, hi-lo), args...); err != nil {
			return fmt.Errorf("update hourly usage by %s: %w", r.column, err)
		}
		return nil
	})
}

// hourlyCols is the number of values per rollup row in hourlySQL.
const hourlyCols = 7

func (s *Store) hourlySQL(r rollup, n int) string {
	t := r.table
	return s.q(`INSERT INTO ` + t + ` (user_id, hour_start, ` + r.column + `, request_count, prompt_tokens, completion_tokens, quota)
		VALUES ` + rowsList(n, hourlyCols) + ` ON CONFLICT (user_id, hour_start, ` + r.column + `) DO UPDATE SET
			request_count = ` + t + `.request_count + excluded.request_count,
			prompt_tokens = ` + t + `.prompt_tokens + excluded.prompt_tokens,
			completion_tokens = ` + t + `.completion_tokens + excluded.completion_tokens,
			quota = ` + t + `.quota + excluded.quota`)
}

// hourFloor is the start of the UTC hour containing the Unix time t.
func hourFloor(t int64) int64 {
	h := t - t%3600
	if t < 0 && t%3600 != 0 {
		h -= 3600
	}
	return h
}

// NewRequestID returns a new request ID: "req_" and 24 hex digits, the
// first 12 the Unix time in milliseconds, the rest 6 random bytes. IDs made
// later sort later, so the unique index on usage_logs.request_id grows at
// its end (a few pages per batch) instead of at random places (one page per
// row), which is most of the cost of writing usage rows.
func NewRequestID() string {
	var b [12]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return "req_" + hex.EncodeToString(b[:])
}
