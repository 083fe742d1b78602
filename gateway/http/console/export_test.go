package console_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/gateway/store"
)

// TestUsageCSV checks the export against the ledger's rows, over more rows
// than a page of the usage query, given only a start (the window ends now).
func TestUsageCSV(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "=export key", 230)
	c := signIn(t, tn)
	start := tn.t0 - 3*86400
	resp, body := do(t, "GET", "/console/usage.csv?start_timestamp="+strconv.FormatInt(start, 10), nil, c, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: status %d, %v: %s", resp.StatusCode, resp.Header, body)
	}
	if !strings.HasSuffix(body, "\n# end\n") {
		t.Fatalf("the export does not end with # end: %q", body[max(0, len(body)-80):])
	}
	records, err := csv.NewReader(strings.NewReader(strings.TrimSuffix(body, "# end\n"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var want []store.UsageRecord
	uq := store.UsageQuery{UserID: tn.acct.Tenant.Status.UserID, Start: start, End: tn.t0 + 7200, PageSize: store.MaxPageSize}
	for {
		page, err := stack.Ledger.ListUsage(ctx, uq)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, page.Rows...)
		if !page.HasMore {
			break
		}
		uq.Cursor = page.NextCursor
	}
	if len(want) != 233 || len(records) != len(want)+1 {
		t.Fatalf("the export has %d lines, the ledger %d rows (want 233 and a header)", len(records), len(want))
	}
	if strings.Join(records[0], ",") != "log_id,created_at,created_time_utc,token_id,token_name,model_name,task_id,prompt_tokens,completion_tokens,cache_tokens,cache_creation_tokens,total_tokens,billing_phase,quota,usd" {
		t.Fatalf("header: %v", records[0])
	}
	for i, w := range want {
		r := records[i+1]
		if r[0] != strconv.FormatInt(w.LogID, 10) || r[1] != strconv.FormatInt(w.CreatedAt, 10) || r[3] != strconv.FormatInt(w.TokenID, 10) ||
			r[5] != w.ModelName || r[7] != strconv.FormatInt(w.PromptTokens, 10) || r[8] != strconv.FormatInt(w.CompletionTokens, 10) ||
			r[11] != strconv.FormatInt(w.TotalTokens, 10) || r[12] != w.BillingPhase || r[13] != strconv.FormatInt(int64(w.Quota), 10) ||
			r[14] != w.Quota.CostUSD() {
			t.Fatalf("row %d: %v, ledger %+v", i, r, w)
		}
		if r[4] != "'=export key" { // a leading = is not a formula
			t.Fatalf("row %d: token name %q", i, r[4])
		}
	}
	// The usage page links the export of its window; the overview's totals
	// link the usage page.
	if body := page(t, "/console/usage", c); !strings.Contains(body, `id="export-csv" class="export" href="/console/usage.csv?end_timestamp=`) {
		t.Fatal("the usage page has no export link")
	}
	if body := page(t, "/console/overview", c); !strings.Contains(body, `id="month-usage" href="/console/usage?start_timestamp=`) {
		t.Fatal("the overview's month total links no usage page")
	}
	if resp, _ := do(t, "GET", "/console/usage.csv?start_timestamp=1", nil, c, nil); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a window of decades: status %d, want 422", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", "/console/usage.csv?start_timestamp="+strconv.FormatInt(start, 10), nil, nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("without a session: status %d, want 303", resp.StatusCode)
	}
}
