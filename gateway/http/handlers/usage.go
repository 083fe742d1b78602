package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// Usage serves GET /api/usage/tokens/requests and /summary, authenticated by
// the account's access token and X-User-Id, never by an API key.
type Usage struct {
	Ledger UsageLedger
	// Auth resolves the access token.
	Auth  Authenticator
	Clock clock.PassiveClock
}

type usageMeta struct {
	StartTimestamp        int64  `json:"start_timestamp"`
	EndTimestamp          int64  `json:"end_timestamp"`
	PageSize              int    `json:"page_size"`
	HasMore               bool   `json:"has_more"`
	NextCursor            string `json:"next_cursor"`
	CostBasis             string `json:"cost_basis"`
	Currency              string `json:"currency"`
	QuotaPerUSD           string `json:"quota_per_usd"`
	ConsumeLoggingEnabled bool   `json:"consume_logging_enabled"`
	RefundsIncluded       bool   `json:"refunds_included"`
	TotalTokensBasis      string `json:"total_tokens_basis"`
}

type usageRequestRow struct {
	LogID               int64  `json:"log_id"`
	CreatedAt           int64  `json:"created_at"`
	TokenID             int64  `json:"token_id"`
	TokenName           string `json:"token_name"`
	ModelName           string `json:"model_name"`
	TaskID              string `json:"task_id"`
	PromptTokens        int64  `json:"prompt_tokens"`
	CompletionTokens    int64  `json:"completion_tokens"`
	CacheTokens         *int64 `json:"cache_tokens"`
	CacheCreationTokens *int64 `json:"cache_creation_tokens"`
	ReportedTotalTokens *int64 `json:"reported_total_tokens"`
	TotalTokens         int64  `json:"total_tokens"`
	BillingPhase        string `json:"billing_phase"`
	Quota               int64  `json:"quota"`
	CostUSD             string `json:"cost_usd"`
}

type usageSummaryRow struct {
	TokenID          int64  `json:"token_id"`
	RequestCount     int64  `json:"request_count"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	TotalTokens      int64  `json:"total_tokens"`
	Quota            int64  `json:"quota"`
	CostUSD          string `json:"cost_usd"`
}

// Requests lists one row per billable request, newest first.
func (h *Usage) Requests(w http.ResponseWriter, r *http.Request) {
	uq, ok := h.query(w, r)
	if !ok {
		return
	}
	page, err := h.Ledger.ListUsage(r.Context(), uq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows := make([]usageRequestRow, 0, len(page.Rows))
	for _, u := range page.Rows {
		rows = append(rows, usageRequestRow{
			LogID: u.LogID, CreatedAt: u.CreatedAt, TokenID: u.TokenID, TokenName: u.TokenName,
			ModelName: u.ModelName, TaskID: u.TaskID, PromptTokens: u.PromptTokens,
			CompletionTokens: u.CompletionTokens, CacheTokens: u.CacheTokens,
			CacheCreationTokens: u.CacheCreationTokens, ReportedTotalTokens: u.ReportedTotalTokens,
			TotalTokens: u.PromptTokens + u.CompletionTokens, BillingPhase: u.BillingPhase,
			Quota: int64(u.Quota), CostUSD: u.Quota.CostUSD(),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": rows, "meta": meta(uq, page.PageSize, page.HasMore, page.NextCursor)})
}

// Summary lists one row per API key, ordered by token_id.
func (h *Usage) Summary(w http.ResponseWriter, r *http.Request) {
	uq, ok := h.query(w, r)
	if !ok {
		return
	}
	page, err := h.Ledger.SummarizeUsage(r.Context(), uq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows := make([]usageSummaryRow, 0, len(page.Rows))
	for _, u := range page.Rows {
		rows = append(rows, usageSummaryRow{
			TokenID: u.TokenID, RequestCount: u.RequestCount, PromptTokens: u.PromptTokens,
			CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
			Quota: int64(u.Quota), CostUSD: u.Quota.CostUSD(),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": rows, "meta": meta(uq, page.PageSize, page.HasMore, page.NextCursor)})
}

func meta(uq store.UsageQuery, pageSize int, hasMore bool, next string) usageMeta {
	return usageMeta{
		StartTimestamp: uq.Start, EndTimestamp: uq.End, PageSize: pageSize, HasMore: hasMore, NextCursor: next,
		CostBasis: "consume_log_quota", Currency: "USD", QuotaPerUSD: strconv.Itoa(int(billing.QuotaPerUSD)),
		ConsumeLoggingEnabled: true, RefundsIncluded: false, TotalTokensBasis: "logged_prompt_plus_completion",
	}
}

// query authenticates and parses the parameters; false means a response
// was written.
func (h *Usage) query(w http.ResponseWriter, r *http.Request) (store.UsageQuery, bool) {
	tenant, f := h.Auth.AccessToken(r.Context(), r)
	if f != nil {
		code := "unauthorized"
		if f.Status != http.StatusUnauthorized {
			code = "internal_error"
		}
		apierr.Usage(w, f.Status, code, f.Message)
		return store.UsageQuery{}, false
	}
	uq, msg := store.ParseUsageQuery(r.URL.Query(), h.Clock.Now())
	if msg != "" {
		apierr.Usage(w, http.StatusUnprocessableEntity, "invalid_query", msg)
		return uq, false
	}
	uq.UserID = tenant.Status.UserID
	return uq, true
}

// fail maps ledger errors to the contract's codes.
func (h *Usage) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrQueryTimeout):
		apierr.Usage(w, http.StatusServiceUnavailable, "query_timeout", "the query took too long; shorten the window and retry")
	case errors.Is(err, store.ErrInvalidQuery):
		apierr.Usage(w, http.StatusUnprocessableEntity, "invalid_query", invalidQueryMessage(err))
	default:
		log.FromContext(r.Context()).Error(err, "usage query")
		apierr.Usage(w, http.StatusInternalServerError, "internal_error", "the usage query failed")
	}
}

func invalidQueryMessage(err error) string {
	if errors.Is(err, store.ErrInvalidCursor) {
		return "cursor is not valid for this endpoint, window and token_id"
	}
	return err.Error()
}
