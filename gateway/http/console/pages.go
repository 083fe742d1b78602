package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
)

const day = 24 * time.Hour

// ---- overview

type grantRow struct {
	ID, Reason string
	Amount     billing.Quota
	Applied    bool
}

type overviewData struct {
	Unlimited                    bool
	Remain, Used                 billing.Quota
	CreditLimit, Available       billing.Quota // the credit line, and Remain plus it
	Today, Month                 billing.Quota
	TodayRequests, MonthRequests int64
	Grants                       []grantRow
	// TodayURL and MonthURL open the usage page on the window of the
	// total: a start alone, which ends now.
	TodayURL, MonthURL string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	ctx, userID := r.Context(), t.Status.UserID
	b, leased, _, err := c.d.Ledger.TenantStanding(ctx, userID)
	if err != nil {
		c.fail(w, r, "overview", t, err, "The balance cannot be read right now.")
		return
	}
	now := c.d.Clock.Now().UTC()
	today := now.Truncate(day)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := c.d.Ledger.UsageSeries(ctx, store.SeriesQuery{UserID: userID, Start: month.Unix(),
		End: today.Add(day).Unix(), Bucket: store.BucketDay})
	if err != nil {
		c.fail(w, r, "overview", t, err, "Usage cannot be read right now.")
		return
	}
	// As the balance endpoint: quota leased to a gateway replica is not spent.
	d := overviewData{Unlimited: b.Unlimited || t.Spec.UnlimitedQuota, Remain: b.Remain + leased, Used: b.Used,
		CreditLimit: b.CreditLimit, Available: b.Remain + leased + b.CreditLimit,
		TodayURL: Prefix + "usage?start_timestamp=" + strconv.FormatInt(today.Unix(), 10),
		MonthURL: Prefix + "usage?start_timestamp=" + strconv.FormatInt(month.Unix(), 10)}
	for _, u := range days {
		d.Month += u.Quota
		d.MonthRequests += u.RequestCount
		if u.Bucket >= today.Unix() {
			d.Today += u.Quota
			d.TodayRequests += u.RequestCount
		}
	}
	for _, g := range t.Spec.Grants {
		row := grantRow{ID: g.ID, Reason: g.Reason, Applied: slices.Contains(t.Status.AppliedGrants, g.ID)}
		switch {
		case g.Quota != nil:
			row.Amount = billing.Quota(*g.Quota)
		case g.Credits != nil:
			row.Amount, _ = billing.QuotaFromCreditsText(string(*g.Credits))
		}
		d.Grants = append(d.Grants, row)
	}
	c.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Page: "overview", Tenant: t, Data: d})
}

// ---- keys

type keyRow struct {
	ID                     int64
	Name, Prefix, Status   string
	Remain, Used           billing.Quota
	Unlimited              bool
	Balance                bool // Remain and Used are known
	Daily, Monthly         billing.Quota
	DailyUsed, MonthlyUsed billing.Quota
	RPM                    int32
	TPM                    int64
	Group, Models          string
	Expires                int64
	// Object is the ApiToken's name, which the forms post to; ReadOnly
	// says why the console may not change the key, when it may not.
	Object, ReadOnly, ManagedBy string
	Disabled                    bool
	// DailyCredits and MonthlyCredits fill the limits form.
	DailyCredits, MonthlyCredits string
}

// keysData is the Keys page: the rows, the key just created (shown once),
// and the create form as posted when it was refused.
type keysData struct {
	Rows   []keyRow
	New    *newKey
	Form   KeyForm
	Manage bool
}

var tokenStates = map[v1.TokenState]string{
	v1.TokenEnabled: "enabled", v1.TokenDisabled: "disabled", v1.TokenExpired: "expired", v1.TokenExhausted: "quota exhausted",
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	c.keysPage(w, r, t, http.StatusOK, "", nil, KeyForm{})
}

// keysPage renders the Keys page with a status and message (an action's
// refusal), the key just created and the create form's values.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, t *v1.Tenant, status int, msg string, created *newKey, form KeyForm) {
	ctx := r.Context()
	list := &v1.ApiTokenList{}
	if err := c.d.Cache.List(ctx, list, client.InNamespace(t.Namespace)); err != nil {
		c.fail(w, r, "keys", t, err, "The keys cannot be listed right now.")
		return
	}
	rows := make([]keyRow, 0, len(list.Items))
	now := c.d.Clock.Now()
	for i := range list.Items {
		k := &list.Items[i]
		if !k.DeletionTimestamp.IsZero() {
			continue
		}
		row := keyRow{ID: k.Status.TokenID, Name: k.Spec.DisplayName, Prefix: k.Status.KeyPrefix,
			Unlimited: k.Spec.UnlimitedQuota, Daily: billing.Quota(k.Spec.DailyQuota), Monthly: billing.Quota(k.Spec.MonthlyQuota),
			RPM: k.Spec.RequestsPerMinute, TPM: k.Spec.TokensPerMinute, Group: k.Spec.Group,
			Object: k.Name, ManagedBy: k.Labels[ManagedByLabel], Disabled: k.Spec.Disabled}
		if row.ManagedBy == ManagedByGitOps {
			row.ReadOnly = gitopsReason
		}
		if k.Spec.DailyQuota > 0 {
			row.DailyCredits = billing.Quota(k.Spec.DailyQuota).CreditsString()
		}
		if k.Spec.MonthlyQuota > 0 {
			row.MonthlyCredits = billing.Quota(k.Spec.MonthlyQuota).CreditsString()
		}
		if row.Prefix == "" {
			row.Prefix = k.Spec.KeyPrefix
		}
		if k.Spec.ModelLimitsEnabled {
			for j, m := range k.Spec.ModelLimits {
				if j > 0 {
					row.Models += ", "
				}
				row.Models += string(m)
			}
			if row.Models == "" {
				row.Models = "none"
			}
		}
		if k.Spec.ExpiresAt != nil {
			row.Expires = k.Spec.ExpiresAt.Unix()
		}
		row.Status = keyStatus(k, now)
		if row.ID != 0 {
			if b, holds, err := c.d.Ledger.TokenStanding(ctx, row.ID); err == nil && b.UserID == t.Status.UserID {
				row.Balance, row.Remain, row.Used = true, b.Remain+holds.Leased, b.Used
				row.DailyUsed, row.MonthlyUsed = b.DailyUsed, b.MonthlyUsed
			}
		}
		if !row.Balance { // the mirrored figures, until the ledger answers
			row.Remain, row.Used = billing.Quota(k.Status.RemainQuota), billing.Quota(k.Status.UsedQuota)
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b keyRow) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Name, b.Name)) })
	c.render(w, r, status, "keys", view{Title: "Keys", Page: "keys", Tenant: t, Error: msg,
		Data: keysData{Rows: rows, New: created, Form: form, Manage: c.mayManageKeys(r, t)}})
}

// keyStatus is the contract's status of a key now (ApiToken.StateAt, as the
// controller computes it), or "provisioning" for a usable key the
// controller has not made ready yet.
func keyStatus(k *v1.ApiToken, now time.Time) string {
	st := k.StateAt(now)
	if st == v1.TokenEnabled || st == v1.TokenExhausted {
		if !meta.IsStatusConditionTrue(k.Status.Conditions, v1.ConditionReady) {
			return "provisioning"
		}
	}
	return tokenStates[st]
}

// ---- usage

type usageData struct {
	Start, End int64
	Rows       []store.UsageRecord
	HasMore    bool
	NextURL    string
	FirstURL   string
	IsFirst    bool
	Windows    []windowLink
	WindowCost billing.Quota
	Chart      chartData
	// CSVURL exports every row of the window (usageCSV).
	CSVURL string
}

type windowLink struct {
	Label, URL string
	Current    bool
}

// usage shows exactly the rows of GET /api/usage/tokens/requests for the
// same parameters (start_timestamp, end_timestamp, token_id, page_size,
// cursor), by the same query; without a window it shows the last 7 days.
func (c *Console) usage(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	ctx := r.Context()
	q := r.URL.Query()
	now := c.d.Clock.Now().UTC()
	if !q.Has("start_timestamp") && !q.Has("end_timestamp") {
		end := now.Truncate(time.Minute).Add(time.Minute)
		q.Set("start_timestamp", strconv.FormatInt(end.Add(-7*day).Unix(), 10))
		q.Set("end_timestamp", strconv.FormatInt(end.Unix(), 10))
	}
	rowsQuery := url.Values{} // the API's parameters; the chart's are the console's own
	for k, v := range q {
		if k != "metric" && k != "split" && k != "bucket" {
			rowsQuery[k] = v
		}
	}
	uq, msg := store.ParseUsageQuery(rowsQuery, now)
	if msg != "" {
		c.render(w, r, http.StatusUnprocessableEntity, "usage", view{Title: "Usage", Page: "usage", Tenant: t, Error: msg})
		return
	}
	uq.UserID = t.Status.UserID
	page, err := c.d.Ledger.ListUsage(ctx, uq)
	if err != nil {
		if errors.Is(err, store.ErrInvalidQuery) {
			c.render(w, r, http.StatusUnprocessableEntity, "usage", view{Title: "Usage", Page: "usage", Tenant: t,
				Error: "The window or cursor is not valid: a window is at most 31 days and a cursor belongs to its window."})
			return
		}
		c.fail(w, r, "usage", t, err, "Usage cannot be read right now.")
		return
	}
	d := usageData{Start: uq.Start, End: uq.End, Rows: page.Rows, HasMore: page.HasMore, IsFirst: uq.Cursor == ""}
	base := url.Values{}
	for _, k := range []string{"start_timestamp", "end_timestamp", "token_id", "page_size", "metric", "split", "bucket"} {
		if v := q.Get(k); v != "" {
			base.Set(k, v)
		}
	}
	d.FirstURL = Prefix + "usage?" + base.Encode()
	export := url.Values{"start_timestamp": {strconv.FormatInt(uq.Start, 10)}, "end_timestamp": {strconv.FormatInt(uq.End, 10)}}
	if v := q.Get("token_id"); v != "" {
		export.Set("token_id", v)
	}
	d.CSVURL = Prefix + "usage.csv?" + export.Encode()
	if page.HasMore {
		next := url.Values{}
		for k, v := range base {
			next[k] = v
		}
		next.Set("cursor", page.NextCursor)
		d.NextURL = Prefix + "usage?" + next.Encode()
	}
	end := now.Truncate(time.Minute).Add(time.Minute)
	for _, wl := range []struct {
		label string
		span  time.Duration
	}{{"24 hours", day}, {"7 days", 7 * day}, {"30 days", 30 * day}} {
		v := url.Values{}
		for _, k := range []string{"metric", "split"} { // the chart's bucket follows the window
			if q.Get(k) != "" {
				v.Set(k, q.Get(k))
			}
		}
		v.Set("start_timestamp", strconv.FormatInt(end.Add(-wl.span).Unix(), 10))
		v.Set("end_timestamp", strconv.FormatInt(end.Unix(), 10))
		d.Windows = append(d.Windows, windowLink{Label: "Last " + wl.label, URL: Prefix + "usage?" + v.Encode(),
			Current: uq.End-uq.Start == int64(wl.span/time.Second) && uq.End >= end.Unix()-60})
	}
	opts, ok := parseChartOptions(q, uq.End-uq.Start)
	if !ok {
		c.render(w, r, http.StatusUnprocessableEntity, "usage", view{Title: "Usage", Page: "usage", Tenant: t,
			Error: "The chart options are not valid: metric is cost, requests or tokens; split is key or model; bucket is hour or day."})
		return
	}
	points, err := c.d.Ledger.UsageSeries(ctx, store.SeriesQuery{UserID: uq.UserID, Start: uq.Start, End: uq.End,
		Bucket: opts.Bucket, Split: opts.Split})
	if errors.Is(err, store.ErrInvalidQuery) {
		c.render(w, r, http.StatusUnprocessableEntity, "usage", view{Title: "Usage", Page: "usage", Tenant: t,
			Error: "The chart cannot show this window per hour: an hourly chart covers at most 7 days."})
		return
	}
	if err != nil {
		c.fail(w, r, "usage", t, err, "Usage cannot be read right now.")
		return
	}
	names, err := c.keyNames(r, t)
	if err != nil {
		c.fail(w, r, "usage", t, err, "The keys cannot be listed right now.")
		return
	}
	d.Chart = layoutChart(opts, uq.Start, uq.End, points, names)
	for _, g := range d.Chart.Groups {
		d.WindowCost += g.Quota
	}
	d.Chart.Links = chartLinks(base, opts)
	c.render(w, r, http.StatusOK, "usage", view{Title: "Usage", Page: "usage", Tenant: t, Data: d})
}

// keyNames are the display names of the tenant's keys by token ID.
func (c *Console) keyNames(r *http.Request, t *v1.Tenant) (map[int64]string, error) {
	list := &v1.ApiTokenList{}
	if err := c.d.Cache.List(r.Context(), list, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(list.Items))
	for i := range list.Items {
		if k := &list.Items[i]; k.Status.TokenID != 0 {
			names[k.Status.TokenID] = cmp.Or(k.Spec.DisplayName, k.Name)
		}
	}
	return names, nil
}

// ---- tasks

type taskRow struct {
	tasks.View
	Type string
}

// maxTasks bounds the tasks page: the newest ones.
const maxTasks = 200

func (c *Console) tasks(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	ctx := r.Context()
	list := &v1.GenerationTaskList{}
	if err := c.d.Cache.List(ctx, list, client.InNamespace(t.Namespace)); err != nil {
		c.fail(w, r, "tasks", t, err, "Tasks cannot be listed right now.")
		return
	}
	items := list.Items
	slices.SortFunc(items, func(a, b v1.GenerationTask) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(b.Spec.TaskID, a.Spec.TaskID))
	})
	rows := []taskRow{}
	now := c.d.Clock.Now()
	for i := range items {
		if len(rows) == maxTasks {
			break
		}
		gt := items[i].DeepCopy()
		if gt.Spec.UserID != t.Status.UserID {
			continue
		}
		expired := gt.Status.ExpiresAt != nil && !now.Before(gt.Status.ExpiresAt.Time)
		if c.d.Results == nil || expired {
			gt.Status.Result = nil // links only while the task API would show them
		}
		rows = append(rows, taskRow{View: tasks.Render(ctx, gt, c.d.Results, now), Type: string(gt.Spec.Type)})
	}
	c.render(w, r, http.StatusOK, "tasks", view{Title: "Tasks", Page: "tasks", Tenant: t,
		Data: map[string]any{"Rows": rows, "Total": len(items), "Limit": maxTasks}})
}

// ---- prices

func (c *Console) prices(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	q := pricing.CatalogQuery{Limit: pricing.MaxCatalogLimit}
	if after := r.URL.Query().Get("after"); after != "" {
		pq, err := pricing.ParseCatalogQuery(url.Values{"after": {after}})
		if err != nil {
			c.render(w, r, http.StatusBadRequest, "prices", view{Title: "Prices", Page: "prices", Tenant: t, Error: "That page link is not valid."})
			return
		}
		q.After = pq.After
	}
	page, err := c.d.Catalog(r.Context(), t, q)
	if err != nil {
		c.fail(w, r, "prices", t, err, "The price catalog cannot be built right now.")
		return
	}
	next := ""
	if page.HasMore {
		next = Prefix + "prices?" + url.Values{"after": {page.NextAfter}}.Encode()
	}
	c.render(w, r, http.StatusOK, "prices", view{Title: "Prices", Page: "prices", Tenant: t,
		Data: map[string]any{"Page": page, "NextURL": next}})
}
