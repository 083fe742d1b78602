package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func usageRows(userID, tokenID int64, prefix string, from int64, n int) []UsageRow {
	rows := make([]UsageRow, n)
	for i := range rows {
		cache := int64(i)
		rows[i] = UsageRow{
			RequestID: fmt.Sprintf("%s-%d", prefix, i), CreatedAt: from + int64(i/3), // three rows share each second
			UserID: userID, TokenID: tokenID, TokenName: "key", ModelName: "model-x",
			PromptTokens: 10, CompletionTokens: 5, CacheTokens: &cache, BillingPhase: PhaseSettled,
			Quota: billing.Quota(100 + i), Backend: "upstream-secret",
		}
	}
	return rows
}

func TestListUsagePagination(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 0, 0, TokenLimits{})
		const start = 1_780_000_000
		_, err := s.InsertUsage(ctx, usageRows(a.userID, a.tokenID, "old", start, 95))
		g.Expect(err).NotTo(HaveOccurred())
		other := newAccount(t, s, 0, 0, TokenLimits{})
		_, err = s.InsertUsage(ctx, usageRows(other.userID, other.tokenID, "other", start, 10))
		g.Expect(err).NotTo(HaveOccurred())

		q := UsageQuery{UserID: a.userID, Start: start, End: start + 86400, PageSize: 20}
		seen := map[int64]bool{}
		var prev *UsageRecord
		pages := 0
		for {
			p, err := s.ListUsage(ctx, q)
			g.Expect(err).NotTo(HaveOccurred())
			pages++
			for i := range p.Rows {
				r := p.Rows[i]
				g.Expect(seen[r.LogID]).To(BeFalse(), "row %d seen twice", r.LogID)
				seen[r.LogID] = true
				if prev != nil {
					g.Expect(r.CreatedAt < prev.CreatedAt || (r.CreatedAt == prev.CreatedAt && r.LogID < prev.LogID)).To(BeTrue(), "newest first")
				}
				prev = &r
			}
			if pages == 1 {
				g.Expect(p.Rows[0].TotalTokens).To(Equal(int64(15)))
				g.Expect(p.Rows[0].CacheTokens).NotTo(BeNil())
				g.Expect(p.Rows[0].ReportedTotalTokens).To(BeNil())
				// Rows arrive while the client pages; older rows are unaffected.
				_, err := s.InsertUsage(ctx, usageRows(a.userID, a.tokenID, "new", start+40, 9))
				g.Expect(err).NotTo(HaveOccurred())
			}
			if !p.HasMore {
				g.Expect(p.NextCursor).To(BeEmpty())
				break
			}
			g.Expect(p.Rows).To(HaveLen(20))
			q.Cursor = p.NextCursor
		}
		g.Expect(pages).To(Equal(5))
		g.Expect(seen).To(HaveLen(95), "every older row exactly once")

		// A cursor only works for the query that produced it.
		first, err := s.ListUsage(ctx, UsageQuery{UserID: a.userID, Start: start, End: start + 86400, PageSize: 10})
		g.Expect(err).NotTo(HaveOccurred())
		c := first.NextCursor
		for _, bad := range []UsageQuery{
			{UserID: a.userID, Start: start, End: start + 86401, Cursor: c},
			{UserID: a.userID, Start: start + 1, End: start + 86400, Cursor: c},
			{UserID: a.userID, Start: start, End: start + 86400, TokenID: a.tokenID, Cursor: c},
			{UserID: other.userID, Start: start, End: start + 86400, Cursor: c},
			{UserID: a.userID, Start: start, End: start + 86400, Cursor: c[:len(c)-2] + "AA"},
			{UserID: a.userID, Start: start, End: start + 86400, Cursor: "!!"},
		} {
			_, err := s.ListUsage(ctx, bad)
			g.Expect(err).To(MatchError(ErrInvalidCursor), "%+v", bad)
			g.Expect(err).To(MatchError(ErrInvalidQuery))
		}
		_, err = s.SummarizeUsage(ctx, UsageQuery{UserID: a.userID, Start: start, End: start + 86400, Cursor: c})
		g.Expect(err).To(MatchError(ErrInvalidCursor), "a requests cursor on the summary endpoint")
		next, err := s.ListUsage(ctx, UsageQuery{UserID: a.userID, Start: start, End: start + 86400, PageSize: 30, Cursor: c})
		g.Expect(err).NotTo(HaveOccurred(), "page size may change between pages")
		g.Expect(next.Rows).To(HaveLen(30))

		// Token filter.
		p, err := s.ListUsage(ctx, UsageQuery{UserID: other.userID, Start: start, End: start + 86400, TokenID: other.tokenID})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Rows).To(HaveLen(10))
		g.Expect(p.PageSize).To(Equal(DefaultPageSize))
	})
}

func TestUsageQueryValidation(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, "sqlite://:memory:")
	ctx := context.Background()
	for _, q := range []UsageQuery{
		{Start: 10, End: 10},
		{Start: 10, End: 5},
		{Start: 0, End: 31*86400 + 1},
		{Start: 0, End: 10, PageSize: 101},
		{Start: 0, End: 10, PageSize: -1},
	} {
		_, err := s.ListUsage(ctx, q)
		g.Expect(err).To(MatchError(ErrInvalidQuery), "%+v", q)
		_, err = s.SummarizeUsage(ctx, q)
		g.Expect(err).To(MatchError(ErrInvalidQuery), "%+v", q)
	}
	_, err := s.ListUsage(ctx, UsageQuery{Start: 0, End: 31 * 86400, PageSize: 100})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestSummarizeUsage(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		a := newAccount(t, s, 0, 0, TokenLimits{})
		const start = 1_780_000_000
		tokens := []int64{a.tokenID}
		for i := range 4 {
			id, err := s.EnsureToken(ctx, TokenSpec{UID: fmt.Sprint("sum-tok-", i), UserID: a.userID, Name: "k"})
			g.Expect(err).NotTo(HaveOccurred())
			tokens = append(tokens, id)
		}
		for i, tok := range tokens {
			_, err := s.InsertUsage(ctx, usageRows(a.userID, tok, fmt.Sprint("sum-", i), start, i+1))
			g.Expect(err).NotTo(HaveOccurred())
		}
		// Outside the window: ignored.
		_, err := s.InsertUsage(ctx, usageRows(a.userID, a.tokenID, "late", start+86400, 3))
		g.Expect(err).NotTo(HaveOccurred())

		q := UsageQuery{UserID: a.userID, Start: start, End: start + 86400, PageSize: 2}
		var got []UsageSummary
		for {
			p, err := s.SummarizeUsage(ctx, q)
			g.Expect(err).NotTo(HaveOccurred())
			got = append(got, p.Rows...)
			if !p.HasMore {
				break
			}
			q.Cursor = p.NextCursor
		}
		g.Expect(got).To(HaveLen(5))
		for i, r := range got {
			n := int64(i + 1)
			g.Expect(r.TokenID).To(Equal(tokens[i]), "ordered by token_id")
			g.Expect(r.RequestCount).To(Equal(n))
			g.Expect(r.PromptTokens).To(Equal(10 * n))
			g.Expect(r.TotalTokens).To(Equal(15 * n))
			g.Expect(r.Quota).To(Equal(billing.Quota(100*n + n*(n-1)/2)))
		}
	})
}

func TestUsageQueryTimeout(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		s := openStore(t, dsn, WithQueryTimeout(time.Nanosecond))
		_, err := s.SummarizeUsage(context.Background(), UsageQuery{UserID: 1, Start: 0, End: 10})
		g.Expect(err).To(MatchError(ErrQueryTimeout))

		// The caller's own cancellation is not a timeout.
		s2 := openStore(t, dsn)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = s2.ListUsage(ctx, UsageQuery{UserID: 1, Start: 0, End: 10})
		g.Expect(err).To(HaveOccurred())
		g.Expect(err).NotTo(MatchError(ErrQueryTimeout))
	})
}

// TestSummaryMatchesRows checks the rollup-based summary against sums over
// the raw rows for windows that start and end inside hours, span one hour
// or none, and filter by token.
func TestSummaryMatchesRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		const base = 1_780_000_000 - 1_780_000_000%3600 // an hour boundary
		var rows []UsageRow
		for i := range 600 {
			rows = append(rows, UsageRow{RequestID: fmt.Sprint("m-", i), CreatedAt: base + int64(i*97%(5*3600)), UserID: 7,
				TokenID: int64(1 + i%4), PromptTokens: int64(i % 13), CompletionTokens: int64(i % 7), Quota: billing.Quota(i)})
		}
		// Two batches, with the second overlapping the first: duplicates must not count twice.
		_, err := s.InsertUsage(ctx, rows[:400])
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.InsertUsage(ctx, rows[300:])
		g.Expect(err).NotTo(HaveOccurred())

		want := func(start, end, token int64) map[int64]UsageSummary {
			m := map[int64]UsageSummary{}
			for _, r := range rows {
				if r.CreatedAt < start || r.CreatedAt >= end || (token != 0 && r.TokenID != token) {
					continue
				}
				v := m[r.TokenID]
				v.TokenID = r.TokenID
				v.RequestCount++
				v.PromptTokens += r.PromptTokens
				v.CompletionTokens += r.CompletionTokens
				v.TotalTokens += r.PromptTokens + r.CompletionTokens
				v.Quota += r.Quota
				m[r.TokenID] = v
			}
			return m
		}
		for _, w := range []struct{ start, end, token int64 }{
			{base, base + 5*3600, 0},              // whole hours only
			{base + 17, base + 4*3600 + 5, 0},     // partial edges
			{base + 3600 + 5, base + 3600 + 9, 0}, // inside one hour
			{base + 3599, base + 3601, 0},         // across one boundary, no whole hour
			{base - 3600, base + 2*3600 + 1, 3},   // token filter
		} {
			p, err := s.SummarizeUsage(ctx, UsageQuery{UserID: 7, Start: w.start, End: w.end, TokenID: w.token})
			g.Expect(err).NotTo(HaveOccurred())
			got := map[int64]UsageSummary{}
			for _, r := range p.Rows {
				got[r.TokenID] = r
			}
			g.Expect(got).To(Equal(want(w.start, w.end, w.token)), "window %+v", w)
		}
	})
}

// TestUsageQueriesReadTheIndex holds the embedded ledger's usage queries to
// its one usage_logs index (user, time, log ID, then the key): each reads a
// tenant's window from it, filters a key from its entries, and lists pages in
// its order, with no scan of the table and no sort.
func TestUsageQueriesReadTheIndex(t *testing.T) {
	g := NewWithT(t)
	s := openStore(t, backends[0].dsn(t))
	uq := UsageQuery{UserID: 1, Start: 1_780_000_000, End: 1_780_000_000 + 31*86400}
	byKey := uq
	byKey.TokenID = 7
	type query struct {
		name string
		sql  string
		args []any
	}
	var queries []query
	for _, q := range []UsageQuery{uq, byKey} {
		sql, args := listQuery(q, nil, 101)
		queries = append(queries, query{fmt.Sprintf("list, key %d", q.TokenID), sql, args})
		sql, args = listQuery(q, &[2]int64{1_780_100_000, 42}, 101)
		queries = append(queries, query{fmt.Sprintf("list after a cursor, key %d", q.TokenID), sql, args})
		sql, args = summaryQuery(q, 0, 101)
		queries = append(queries, query{fmt.Sprintf("summary, key %d", q.TokenID), sql, args})
	}
	for _, q := range queries {
		rows, err := s.db.Query("EXPLAIN QUERY PLAN "+q.sql, q.args...)
		g.Expect(err).NotTo(HaveOccurred(), q.name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			g.Expect(rows.Scan(&id, &parent, &unused, &detail)).To(Succeed())
			plan = append(plan, detail)
		}
		g.Expect(rows.Close()).To(Succeed())
		g.Expect(plan).To(ContainElement(ContainSubstring("usage_logs")), q.name)
		for _, step := range plan {
			switch {
			case strings.Contains(step, "usage_logs"):
				g.Expect(step).To(MatchRegexp(`^SEARCH usage_logs USING (COVERING )?INDEX usage_logs_user_time \(user_id=\? AND created_at[<>]`), q.name)
			case strings.Contains(step, "usage_hourly"):
				g.Expect(step).To(HavePrefix("SEARCH usage_hourly USING PRIMARY KEY (user_id=? AND hour_start>? AND hour_start<?)"), q.name)
			}
		}
		if strings.HasPrefix(q.name, "list") {
			g.Expect(plan).NotTo(ContainElement(ContainSubstring("TEMP B-TREE")), q.name+": pages come in the index's order")
		}
	}
}
