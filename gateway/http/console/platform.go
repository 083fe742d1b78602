package console

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// The platform overview: every tenant's spend, by tenant, model, day and
// key, each tenant's state and the tasks in flight, for a platform admin
// (a session of the OIDC sign-in's platform-admin group, which has no
// tenant). It only reads: the ledger's rollups (the tenant pages' charts
// read the same ones) and the informer cache.

// Bounds of the page's lists.
const (
	platformTopKeys  = 10
	platformTasks    = 20
	platformTenantsN = store.MaxPlatformTotals
)

// platformGuard runs page for a platform admin. Anyone else gets the answer
// a path nothing serves gets, without the console's headers, so the page's
// existence is not revealed by its answer.
func (c *Console) platformGuard(page func(w http.ResponseWriter, r *http.Request, subject string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, ok := c.platformAdminOf(r)
		if !ok {
			c.unmatched(w, r)
			return
		}
		c.platformPage(page, subject).ServeHTTP(w, r)
	})
}

// platformPage is the page for one admin, with the console's headers.
func (c *Console) platformPage(page func(w http.ResponseWriter, r *http.Request, subject string), subject string) http.Handler {
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { page(w, r, subject) }))
}

// unmatched answers 404 as the gateway answers a path it does not serve.
func (c *Console) unmatched(w http.ResponseWriter, r *http.Request) {
	if c.d.Unmatched != nil {
		c.d.Unmatched(w, r, http.StatusNotFound, nil)
		return
	}
	http.NotFound(w, r)
}

type platformTenant struct {
	UserID           int64
	Name, Namespace  string
	Deleting, Known  bool // Known: the cache has the Tenant
	State            string
	Reason, Message  string
	NotReady         []string // the conditions that are not True
	Unlimited        bool
	Remain, Used     billing.Quota
	BalanceAt        int64 // when the controller last mirrored the balance
	Requests, Tokens int64
	Quota            billing.Quota
	WindowShare      string // percent of the window's spend
}

type platformKey struct {
	TokenID, UserID  int64
	Name, Tenant     string
	Requests, Tokens int64
	Quota            billing.Quota
}

type taskCount struct {
	Phase, Family string
	Count         int
}

type taskInFlight struct {
	TaskID, Tenant, Namespace, Model, Family, Type, Phase string
	Progress                                              int32
	Created                                               int64
	Age                                                   string
}

// tasksInFlight summarises the GenerationTasks not yet completed or failed.
type tasksInFlight struct {
	Total  int
	Counts []taskCount
	Oldest []taskInFlight // the oldest first, at most platformTasks
}

type platformData struct {
	Admin            string
	Start, End       int64 // the window asked for
	ChartStart       int64 // the charted whole buckets start here
	ChartEnd         int64
	Windows          []windowLink
	Quota            billing.Quota
	Requests, Tokens int64
	TenantsReady     int
	Tenants          []platformTenant
	TenantsCapped    bool
	Keys             []platformKey
	ByDay, ByModel   chartData
	Tasks            tasksInFlight
	TenantCount      int
}

// platform renders the overview for the admin subject. The window is
// start_timestamp and end_timestamp as on the usage page (default: the last
// 7 days); the figures are of its whole buckets, as the charts are.
func (c *Console) platform(w http.ResponseWriter, r *http.Request, subject string) {
	const page = "platform"
	ctx := r.Context()
	v := view{Title: "Platform", Page: page, Admin: subject}
	now := c.d.Clock.Now().UTC()
	start, end, msg := platformWindow(r.URL.Query(), now)
	if msg != "" {
		v.Error = msg
		c.render(w, r, http.StatusUnprocessableEntity, page, v)
		return
	}
	opts := chartOptions{Metric: metricCost, Bucket: store.BucketDay}
	if end-start <= int64(hourlyUpTo/time.Second) {
		opts.Bucket = store.BucketHour
	}
	q := store.PlatformQuery{Start: start, End: end, Bucket: opts.Bucket}
	fail := func(err error, msg string) {
		if errors.Is(err, store.ErrInvalidQuery) {
			v.Error = "The window is not valid: a window is at most 31 days."
			c.render(w, r, http.StatusUnprocessableEntity, page, v)
			return
		}
		c.failAdmin(w, r, v, err, msg)
	}
	days, err := c.d.Ledger.PlatformSeries(ctx, q)
	if err != nil {
		fail(err, "Usage cannot be read right now.")
		return
	}
	q.Split = store.SplitModel
	models, err := c.d.Ledger.PlatformSeries(ctx, q)
	if err != nil {
		fail(err, "Usage cannot be read right now.")
		return
	}
	q.Split, q.Limit = store.SplitTenant, platformTenantsN
	byTenant, err := c.d.Ledger.PlatformTotals(ctx, q)
	if err != nil {
		fail(err, "Usage cannot be read right now.")
		return
	}
	q.Split, q.Limit = store.SplitKey, platformTopKeys
	byKey, err := c.d.Ledger.PlatformTotals(ctx, q)
	if err != nil {
		fail(err, "Usage cannot be read right now.")
		return
	}
	// The lists are only read, so the cache's objects need no copies.
	tenants := &v1.TenantList{}
	if err := c.d.Cache.List(ctx, tenants, client.UnsafeDisableDeepCopy); err != nil {
		c.failAdmin(w, r, v, err, "The tenants cannot be listed right now.")
		return
	}
	gts := &v1.GenerationTaskList{}
	if err := c.d.Cache.List(ctx, gts, client.UnsafeDisableDeepCopy); err != nil {
		c.failAdmin(w, r, v, err, "Tasks cannot be listed right now.")
		return
	}

	d := platformData{Admin: subject, Start: start, End: end, Windows: platformWindows(start, end, now)}
	d.ChartStart = start - start%opts.Bucket
	d.ChartEnd = end + (opts.Bucket-end%opts.Bucket)%opts.Bucket
	d.ByDay = layoutChart(opts, start, end, days, nil)
	d.ByDay.ID, d.ByDay.TableID = "platform-chart", "platform-breakdown"
	mo := opts
	mo.Split = store.SplitModel
	d.ByModel = layoutChart(mo, start, end, models, nil)
	d.ByModel.ID, d.ByModel.TableID = "model-chart", "model-breakdown"
	for _, p := range days {
		d.Quota += p.Quota
		d.Requests += p.RequestCount
		d.Tokens += p.Tokens
	}
	rows, names := tenantRows(tenants.Items, byTenant, d.Quota)
	d.Tenants = rows
	d.TenantsCapped = len(byTenant) == platformTenantsN
	d.TenantCount = len(tenants.Items)
	for _, t := range d.Tenants {
		if t.Known && t.State == "ready" {
			d.TenantsReady++
		}
	}
	for _, k := range byKey {
		row := platformKey{TokenID: k.TokenID, UserID: k.UserID, Name: k.TokenName, Requests: k.RequestCount, Tokens: k.Tokens, Quota: k.Quota}
		row.Tenant = tenantLabel(names[k.UserID], k.UserID)
		d.Keys = append(d.Keys, row)
	}
	d.Tasks = summarizeTasks(gts.Items, names, now)
	v.Data = d
	c.render(w, r, http.StatusOK, page, v)
}

// failAdmin renders the platform page's error without internals.
func (c *Console) failAdmin(w http.ResponseWriter, r *http.Request, v view, err error, msg string) {
	slog.ErrorContext(r.Context(), "console page", "page", v.Page, "admin", v.Admin, "error", err)
	v.Error = msg
	c.render(w, r, http.StatusServiceUnavailable, v.Page, v)
}

// platformWindow reads start_timestamp and end_timestamp (Unix seconds);
// without either it is the last 7 days up to the next minute, and a start
// alone ends then too. A non-empty string is the 422 message.
func platformWindow(q url.Values, now time.Time) (int64, int64, string) {
	for name := range q {
		if name != "start_timestamp" && name != "end_timestamp" {
			return 0, 0, "Unknown query parameter: " + name + "."
		}
	}
	end := now.Truncate(time.Minute).Add(time.Minute).Unix()
	start := end - int64(7*day/time.Second)
	for name, p := range map[string]*int64{"start_timestamp": &start, "end_timestamp": &end} {
		if s := q.Get(name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, 0, name + " must be an integer."
			}
			*p = n
		}
	}
	if end <= start {
		return 0, 0, "end_timestamp must be after start_timestamp."
	}
	if time.Duration(end-start)*time.Second > store.MaxUsageWindow {
		return 0, 0, "The window is not valid: a window is at most 31 days."
	}
	return start, end, ""
}

// platformWindows are the usage page's window choices on this page.
func platformWindows(start, end int64, now time.Time) []windowLink {
	last := now.Truncate(time.Minute).Add(time.Minute)
	var out []windowLink
	for _, wl := range []struct {
		label string
		span  time.Duration
	}{{"24 hours", day}, {"7 days", 7 * day}, {"30 days", 30 * day}} {
		v := url.Values{"start_timestamp": {strconv.FormatInt(last.Add(-wl.span).Unix(), 10)},
			"end_timestamp": {strconv.FormatInt(last.Unix(), 10)}}
		out = append(out, windowLink{Label: "Last " + wl.label, URL: Prefix + "platform?" + v.Encode(),
			Current: end-start == int64(wl.span/time.Second) && end >= last.Unix()-60})
	}
	return out
}

// tenantRows joins the Tenants of the cache with the window's spend by
// user ID: every live Tenant, and a row for spend whose Tenant is gone. The
// largest spend comes first, then by name.
func tenantRows(items []v1.Tenant, spend []store.SpendTotal, total billing.Quota) ([]platformTenant, map[int64]*v1.Tenant) {
	byUser := map[int64]*v1.Tenant{}
	rows := make([]platformTenant, 0, len(items))
	index := map[int64]int{}
	for i := range items {
		t := &items[i]
		row := platformTenant{UserID: t.Status.UserID, Name: cmp.Or(t.Spec.DisplayName, t.Name), Namespace: t.Namespace,
			Known: true, Deleting: !t.DeletionTimestamp.IsZero(), Unlimited: t.Spec.UnlimitedQuota,
			Remain: billing.Quota(t.Status.RemainQuota), Used: billing.Quota(t.Status.UsedQuota)}
		if t.Status.BalanceSyncedAt != nil {
			row.BalanceAt = t.Status.BalanceSyncedAt.Unix()
		}
		row.State, row.Reason, row.Message, row.NotReady = tenantState(t)
		if t.Status.UserID != 0 {
			if _, dup := byUser[t.Status.UserID]; !dup {
				byUser[t.Status.UserID] = t
				index[t.Status.UserID] = len(rows)
			}
		}
		rows = append(rows, row)
	}
	for _, s := range spend {
		i, ok := index[s.UserID]
		if !ok {
			rows = append(rows, platformTenant{UserID: s.UserID, Name: "user " + strconv.FormatInt(s.UserID, 10), State: "not in the cluster"})
			i = len(rows) - 1
			index[s.UserID] = i
		}
		rows[i].Requests, rows[i].Tokens, rows[i].Quota = s.RequestCount, s.Tokens, s.Quota
		if total > 0 {
			rows[i].WindowShare = strconv.FormatFloat(100*float64(s.Quota)/float64(total), 'f', 1, 64)
		}
	}
	slices.SortStableFunc(rows, func(a, b platformTenant) int {
		return cmp.Or(cmp.Compare(b.Quota, a.Quota), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
	})
	return rows, byUser
}

// tenantState is a Tenant's state from its conditions: "ready", "deleting"
// or Ready's reason, with Ready's message and the conditions not True.
func tenantState(t *v1.Tenant) (state, reason, message string, notReady []string) {
	for _, c := range t.Status.Conditions {
		if c.Status != metav1.ConditionTrue && c.Type != v1.ConditionReady {
			notReady = append(notReady, c.Type)
		}
	}
	ready := findCondition(t.Status.Conditions, v1.ConditionReady)
	switch {
	case !t.DeletionTimestamp.IsZero():
		state = "deleting"
	case ready == nil:
		state = "pending"
	case ready.Status == metav1.ConditionTrue:
		state = "ready"
	default:
		state = "not ready"
	}
	if ready != nil && ready.Status != metav1.ConditionTrue {
		reason, message = ready.Reason, ready.Message
	}
	return state, reason, message, notReady
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func tenantLabel(t *v1.Tenant, userID int64) string {
	if t == nil {
		return "user " + strconv.FormatInt(userID, 10)
	}
	return cmp.Or(t.Spec.DisplayName, t.Name) + " (" + t.Namespace + ")"
}

// summarizeTasks counts the tasks not completed or failed by phase and
// family (the validation profile) and lists the oldest of them.
func summarizeTasks(items []v1.GenerationTask, tenants map[int64]*v1.Tenant, now time.Time) tasksInFlight {
	var out tasksInFlight
	counts := map[[2]string]int{}
	var open []*v1.GenerationTask
	for i := range items {
		gt := &items[i]
		phase := cmp.Or(gt.Status.Phase, v1.TaskQueued)
		if phase == v1.TaskCompleted || phase == v1.TaskFailed {
			continue
		}
		counts[[2]string{string(phase), string(gt.Spec.Profile)}]++
		open = append(open, gt)
	}
	out.Total = len(open)
	for k, n := range counts {
		out.Counts = append(out.Counts, taskCount{Phase: k[0], Family: k[1], Count: n})
	}
	order := map[string]int{string(v1.TaskQueued): 0, string(v1.TaskSubmitted): 1, string(v1.TaskInProgress): 2}
	slices.SortFunc(out.Counts, func(a, b taskCount) int {
		return cmp.Or(cmp.Compare(order[a.Phase], order[b.Phase]), cmp.Compare(a.Family, b.Family))
	})
	slices.SortFunc(open, func(a, b *v1.GenerationTask) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Spec.TaskID, b.Spec.TaskID))
	})
	for _, gt := range open[:min(len(open), platformTasks)] {
		out.Oldest = append(out.Oldest, taskInFlight{TaskID: gt.Spec.TaskID, Tenant: tenantLabel(tenants[gt.Spec.UserID], gt.Spec.UserID),
			Namespace: gt.Namespace, Model: string(gt.Spec.Model), Family: string(gt.Spec.Profile), Type: string(gt.Spec.Type),
			Phase: string(cmp.Or(gt.Status.Phase, v1.TaskQueued)), Progress: gt.Status.Progress,
			Created: gt.CreationTimestamp.Unix(), Age: now.Sub(gt.CreationTimestamp.Time).Truncate(time.Second).String()})
	}
	return out
}
