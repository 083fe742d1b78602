package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/modelgate/modelgate/gateway/billing"
)

// Limits of the usage endpoints (contract: Limits).
const (
	MaxUsageWindow  = 31 * 24 * time.Hour
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// UsageQuery selects usage of one user in the window [Start, End) (Unix
// seconds), optionally of one token.
type UsageQuery struct {
	UserID   int64
	Start    int64
	End      int64
	TokenID  int64  // 0 = all tokens
	PageSize int    // 0 = DefaultPageSize
	Cursor   string // meta.next_cursor of the previous page, or ""
}

// UsageRecord is a usage request row as the contract shows it; the upstream
// backend is deliberately absent.
type UsageRecord struct {
	LogID               int64
	CreatedAt           int64
	TokenID             int64
	TokenName           string
	ModelName           string
	TaskID              string
	PromptTokens        int64
	CompletionTokens    int64
	CacheTokens         *int64
	CacheCreationTokens *int64
	ReportedTotalTokens *int64
	TotalTokens         int64
	BillingPhase        string
	Quota               billing.Quota
}

// UsageSummary is one usage summary row (one per token).
type UsageSummary struct {
	TokenID          int64
	RequestCount     int64
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	Quota            billing.Quota
}

// Page is one page of a usage query.
type Page[T any] struct {
	Rows       []T
	PageSize   int // the page size applied
	HasMore    bool
	NextCursor string // "" when !HasMore
}

// Cursor kinds: a cursor names the endpoint that produced it.
const (
	cursorRequests byte = 1
	cursorSummary  byte = 2
)

// ListUsage returns usage request rows newest first (created_at, then
// log_id, descending), one page at a time. Pages are keyset-paginated, so
// rows inserted while a client walks the pages never shift older rows: no row
// older than the first page is seen twice or skipped.
func (s *Store) ListUsage(ctx context.Context, uq UsageQuery) (Page[UsageRecord], error) {
	var p Page[UsageRecord]
	size, err := uq.validate()
	if err != nil {
		return p, err
	}
	p.PageSize = size
	var after *[2]int64
	if uq.Cursor != "" {
		k, err := s.openCursor(uq, cursorRequests)
		if err != nil {
			return p, err
		}
		after = &k
	}
	q, args := listQuery(uq, after, size+1)
	err = s.query(ctx, q, args, func(rows *sql.Rows) error {
		var r UsageRecord
		var quota int64
		if err := rows.Scan(&r.LogID, &r.CreatedAt, &r.TokenID, &r.TokenName, &r.ModelName, &r.TaskID, &r.PromptTokens,
			&r.CompletionTokens, &r.CacheTokens, &r.CacheCreationTokens, &r.ReportedTotalTokens, &r.TotalTokens,
			&r.BillingPhase, &quota); err != nil {
			return err
		}
		r.Quota = billing.Quota(quota)
		if r.BillingPhase == "" {
			r.BillingPhase = PhaseUnknown // written without the metadata
		}
		p.Rows = append(p.Rows, r)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("list usage of user %d: %w", uq.UserID, err)
	}
	if len(p.Rows) > size {
		last := p.Rows[size-1]
		p.Rows, p.HasMore = p.Rows[:size], true
		p.NextCursor = s.sealCursor(uq, cursorRequests, last.CreatedAt, last.LogID)
	}
	return p, nil
}

// listQuery selects a page of uq's rows newest first, after the (created_at,
// log_id) key of the previous page's last row when there is one.
func listQuery(uq UsageQuery, after *[2]int64, limit int) (string, []any) {
	q := `SELECT log_id, created_at, token_id, token_name, model_name, task_id, prompt_tokens, completion_tokens,
			cache_tokens, cache_creation_tokens, reported_total_tokens, total_tokens, billing_phase, quota
		FROM usage_logs WHERE user_id = ? AND created_at >= ? AND created_at < ?`
	args := []any{uq.UserID, uq.Start, uq.End}
	if uq.TokenID != 0 {
		q += ` AND token_id = ?`
		args = append(args, uq.TokenID)
	}
	if after != nil {
		q += ` AND (created_at < ? OR (created_at = ? AND log_id < ?))`
		args = append(args, after[0], after[0], after[1])
	}
	q += ` ORDER BY created_at DESC, log_id DESC LIMIT ?`
	return q, append(args, limit)
}

// SummarizeUsage returns one summary row per token, ordered by token ID,
// one page at a time.
func (s *Store) SummarizeUsage(ctx context.Context, uq UsageQuery) (Page[UsageSummary], error) {
	var p Page[UsageSummary]
	size, err := uq.validate()
	if err != nil {
		return p, err
	}
	p.PageSize = size
	after := int64(-1) // token IDs are positive
	if uq.Cursor != "" {
		k, err := s.openCursor(uq, cursorSummary)
		if err != nil {
			return p, err
		}
		after = k[0]
	}
	q, args := summaryQuery(uq, after, size+1)

	err = s.query(ctx, q, args, func(rows *sql.Rows) error {
		var r UsageSummary
		var quota int64
		if err := rows.Scan(&r.TokenID, &r.RequestCount, &r.PromptTokens, &r.CompletionTokens, &quota); err != nil {
			return err
		}
		r.TotalTokens = r.PromptTokens + r.CompletionTokens
		r.Quota = billing.Quota(quota)
		p.Rows = append(p.Rows, r)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("summarize usage of user %d: %w", uq.UserID, err)
	}
	if len(p.Rows) > size {
		p.Rows, p.HasMore = p.Rows[:size], true
		p.NextCursor = s.sealCursor(uq, cursorSummary, p.Rows[size-1].TokenID, 0)
	}
	return p, nil
}

func (uq UsageQuery) validate() (int, error) {
	if uq.End <= uq.Start {
		return 0, fmt.Errorf("end_timestamp must be after start_timestamp: %w", ErrInvalidQuery)
	}
	if time.Duration(uq.End-uq.Start)*time.Second > MaxUsageWindow {
		return 0, fmt.Errorf("window longer than 31 days: %w", ErrInvalidQuery)
	}
	switch {
	case uq.PageSize == 0:
		return DefaultPageSize, nil
	case uq.PageSize < 1 || uq.PageSize > MaxPageSize:
		return 0, fmt.Errorf("page_size must be 1 to %d: %w", MaxPageSize, ErrInvalidQuery)
	}
	return uq.PageSize, nil
}

// query runs a read under the store's query timeout and maps running out of
// it to ErrQueryTimeout (503 query_timeout), distinct from the caller's own
// cancellation.
func (s *Store) query(ctx context.Context, q string, args []any, scan func(*sql.Rows) error) error {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.rdb.QueryContext(qctx, s.q(q), args...)
	if err != nil {
		return s.timeoutErr(ctx, qctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return s.timeoutErr(ctx, qctx, err)
		}
	}
	return s.timeoutErr(ctx, qctx, rows.Err())
}

func (s *Store) timeoutErr(parent, qctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	timedOut := errors.Is(qctx.Err(), context.DeadlineExceeded) && parent.Err() == nil
	if timedOut || (errors.As(err, &pgErr) && pgErr.Code == "57014") { // query_canceled
		return fmt.Errorf("%w after %s: %v", ErrQueryTimeout, s.queryTimeout, err)
	}
	return err
}

// A cursor is base64url(kind ‖ k1 ‖ k2 ‖ end ‖ mac), where end is the
// window's end (a window given only its start keeps the first page's) and mac is a truncated
// HMAC-SHA256, under the ledger's cursor key, of the cursor body and of the
// query it belongs to (user, window, token filter). A cursor therefore cannot
// be forged, edited, or replayed against another endpoint, window, token
// filter or user.
const (
	cursorBody = 1 + 8 + 8 + 8
	cursorMAC  = 16
)

func (s *Store) sealCursor(uq UsageQuery, kind byte, k1, k2 int64) string {
	b := make([]byte, cursorBody, cursorBody+cursorMAC)
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(k1))
	binary.BigEndian.PutUint64(b[9:], uint64(k2))
	binary.BigEndian.PutUint64(b[17:], uint64(uq.End))
	b = append(b, s.cursorMAC(uq, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Store) openCursor(uq UsageQuery, kind byte) ([2]int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(uq.Cursor)
	if err != nil || len(b) != cursorBody+cursorMAC || b[0] != kind {
		return [2]int64{}, ErrInvalidCursor
	}
	if !hmac.Equal(b[cursorBody:], s.cursorMAC(uq, b[:cursorBody])) {
		return [2]int64{}, ErrInvalidCursor
	}
	return [2]int64{int64(binary.BigEndian.Uint64(b[1:])), int64(binary.BigEndian.Uint64(b[9:]))}, nil
}

func (s *Store) cursorMAC(uq UsageQuery, body []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(body)
	var ctx [32]byte
	binary.BigEndian.PutUint64(ctx[0:], uint64(uq.UserID))
	binary.BigEndian.PutUint64(ctx[8:], uint64(uq.Start))
	binary.BigEndian.PutUint64(ctx[16:], uint64(uq.End))
	binary.BigEndian.PutUint64(ctx[24:], uint64(uq.TokenID))
	m.Write(ctx[:])
	return m.Sum(nil)[:cursorMAC]
}

// summaryQuery sums whole hours of the window from the usage_hourly rollup
// and the partial hours at its edges from usage_logs:
//
//	[start, hs) from rows  +  [hs, he) from the rollup  +  [he, end) from rows
//
// where hs is start rounded up and he is end rounded down to an hour. A
// window inside one hour reads rows only.
// settledOnly keeps held reservations (pre_consumed rows) out of the
// summary, as the hourly rollup does: a summary counts charged requests.
const settledOnly = ` AND billing_phase <> '` + PhasePreConsumed + `'`

func summaryQuery(uq UsageQuery, afterToken int64, limit int) (string, []any) {
	hs, he := hourFloor(uq.Start+3599), hourFloor(uq.End)
	if hs >= he {
		hs, he = uq.End, uq.End // no whole hour: rows cover [start, end)
	}
	filter, fargs := `token_id > ?`, []any{afterToken}
	if uq.TokenID != 0 {
		filter += ` AND token_id = ?`
		fargs = append(fargs, uq.TokenID)
	}
	q := `SELECT token_id, CAST(SUM(n) AS BIGINT), CAST(SUM(p) AS BIGINT), CAST(SUM(c) AS BIGINT), CAST(SUM(qu) AS BIGINT) FROM (
			SELECT token_id, request_count AS n, prompt_tokens AS p, completion_tokens AS c, quota AS qu
			FROM usage_hourly WHERE user_id = ? AND hour_start >= ? AND hour_start < ? AND ` + filter + `
			UNION ALL
			SELECT token_id, 1, prompt_tokens, completion_tokens, quota
			FROM usage_logs WHERE user_id = ? AND created_at >= ? AND created_at < ? AND ` + filter + settledOnly + `
			UNION ALL
			SELECT token_id, 1, prompt_tokens, completion_tokens, quota
			FROM usage_logs WHERE user_id = ? AND created_at >= ? AND created_at < ? AND ` + filter + settledOnly + `
		) parts GROUP BY token_id ORDER BY token_id LIMIT ?`
	var args []any
	args = append(append(args, uq.UserID, hs, he), fargs...)
	args = append(append(args, uq.UserID, uq.Start, hs), fargs...)
	args = append(append(args, uq.UserID, he, uq.End), fargs...)
	return q, append(args, limit)
}
