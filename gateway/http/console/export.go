package console

import (
	"encoding/csv"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/store"
)

// csvHeader names the columns of the usage export: the fields of GET
// /api/usage/tokens/requests, in its order, with the time also in UTC and
// the cost also in USD.
var csvHeader = []string{"log_id", "created_at", "created_time_utc", "token_id", "token_name", "model_name", "task_id",
	"prompt_tokens", "completion_tokens", "cache_tokens", "cache_creation_tokens", "total_tokens", "billing_phase", "quota", "usd"}

// usageCSV streams every usage row of a window as CSV: the usage page's
// parameters (start_timestamp, optional end_timestamp and token_id; a start
// alone ends now), read page by page with the usage API's query and cursor
// (store.ListUsage, 100 rows a page), so there is no row limit and no more
// than a page in memory. A failure after the first row ends the body early;
// the last line is then not "# end", which says the file is whole.
func (c *Console) usageCSV(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	q := url.Values{}
	for _, k := range []string{"start_timestamp", "end_timestamp", "token_id"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	uq, msg := store.ParseUsageQuery(q, c.d.Clock.Now())
	if msg != "" {
		http.Error(w, msg, http.StatusUnprocessableEntity)
		return
	}
	uq.UserID, uq.PageSize = t.Status.UserID, store.MaxPageSize
	ctx := r.Context()
	page, err := c.d.Ledger.ListUsage(ctx, uq)
	if errors.Is(err, store.ErrInvalidQuery) {
		http.Error(w, "the window is not valid: a window is at most 31 days", http.StatusUnprocessableEntity)
		return
	}
	if err != nil {
		logError(ctx, "console usage export", err)
		http.Error(w, "usage cannot be read right now", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage-`+strconv.FormatInt(uq.Start, 10)+"-"+strconv.FormatInt(uq.End, 10)+`.csv"`)
	flusher, _ := w.(http.Flusher)
	out := csv.NewWriter(w)
	_ = out.Write(csvHeader)
	for {
		for _, row := range page.Rows {
			_ = out.Write(csvRecord(row))
		}
		out.Flush()
		if out.Error() != nil {
			return // the client went away
		}
		if flusher != nil {
			flusher.Flush()
		}
		if !page.HasMore {
			break
		}
		uq.Cursor = page.NextCursor
		if page, err = c.d.Ledger.ListUsage(ctx, uq); err != nil {
			logError(ctx, "console usage export, a later page", err)
			return
		}
	}
	_, _ = w.Write([]byte("# end\n"))
}

func csvRecord(u store.UsageRecord) []string {
	opt := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	return []string{strconv.FormatInt(u.LogID, 10), strconv.FormatInt(u.CreatedAt, 10),
		time.Unix(u.CreatedAt, 0).UTC().Format(time.RFC3339), strconv.FormatInt(u.TokenID, 10), cell(u.TokenName),
		cell(u.ModelName), cell(u.TaskID), strconv.FormatInt(u.PromptTokens, 10), strconv.FormatInt(u.CompletionTokens, 10),
		opt(u.CacheTokens), opt(u.CacheCreationTokens), strconv.FormatInt(u.TotalTokens, 10), u.BillingPhase,
		strconv.FormatInt(int64(u.Quota), 10), u.Quota.CostUSD()}
}

// cell keeps a name a tenant chose from being read as a formula by a
// spreadsheet (OWASP "CSV injection"): a leading =, +, -, @, tab or CR gets
// a leading apostrophe.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
