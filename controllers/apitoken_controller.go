package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tokenspec"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// ApiTokenReconciler provisions keys, registers tokens in the ledger and
// computes their state.
type ApiTokenReconciler struct {
	Client client.Client
	Ledger Ledger
	Clock  clock.PassiveClock
	// UsageSyncPeriod bounds status writes of mirrored usage.
	UsageSyncPeriod time.Duration
	// Events records key provisioning and registration (nil: none).
	Events events.EventRecorder
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
	// APIReader reads an ApiToken from the API server, not the cache,
	// before a budget alert is raised (mgr.GetAPIReader(); nil: Client).
	APIReader client.Reader
	// Webhooks sends budget alerts to the tenant's spec.webhook (the zero
	// value is ready).
	Webhooks webhook.Sender

	// mirrors spreads the usage mirror's status writes (Setup: shared with
	// the Tenant mirror; nil: no bound).
	mirrors *mirrorBudget

	// registered remembers, per ApiToken UID, the last registration this
	// process wrote to the ledger and the token ID it got: a reconcile whose
	// registration is the same (most of them: the usage mirror's status
	// writes wake the token every period) skips the two ledger writes.
	registered sync.Map // types.UID → registration
}

// registration is one ledger registration of a token.
type registration struct {
	spec store.TokenSpec
	id   int64
}

// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens/finalizers,verbs=update

// Reconcile provisions one ApiToken.
func (r *ApiTokenReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.skeleton().Reconcile(ctx, req)
}

// skeleton is the ApiToken's reconcile: its tenant must be ready, then the
// key is provisioned, registered in the ledger and its usage mirrored, each
// step with its own condition.
func (r *ApiTokenReconciler) skeleton() *reconciler.Reconciler[*v1.ApiToken] {
	return &reconciler.Reconciler[*v1.ApiToken]{
		Client:    r.Client,
		New:       func() *v1.ApiToken { return &v1.ApiToken{} },
		Finalizer: v1.LedgerFinalizer,
		Finalize:  r.disable,
		Steps: []reconciler.Step[*v1.ApiToken]{
			{Run: r.findTenant},
			{Condition: v1.ConditionKeyProvisioned, Run: r.ensureKey},
			{Condition: v1.ConditionRegistered, Run: r.register},
			{Condition: v1.ConditionUsageMirrored, Run: r.mirrorUsage},
			{Run: r.setState},
			{Informational: true, Run: r.raiseAlerts},
		},
		ReadyMessage:   func(*v1.ApiToken) string { return "key is provisioned and registered" },
		MoreConditions: setLedgerSynced,
	}
}

// disable is what deleting a key does to the ledger: it reserves nothing
// more, its leases go back to its balances, its rows stay. The gateways stop
// authenticating it as soon as their caches see the deletion.
func (r *ApiTokenReconciler) disable(ctx context.Context, tok *v1.ApiToken) error {
	r.registered.Delete(tok.UID)
	r.mirrors.forget(tok.UID)
	if tok.Status.TokenID == 0 {
		return nil // never registered
	}
	returned, err := r.Ledger.DisableToken(ctx, tok.Status.TokenID)
	if err != nil {
		return ledgerError{err}
	}
	log.FromContext(ctx).Info("deleted key disabled in the ledger", "tokenID", tok.Status.TokenID, "leaseQuotaReturned", int64(returned))
	return nil
}

// findTenant holds the token up until its namespace has a ready Tenant.
// Without it (not ready yet, or deleted) a key cannot be used; its ledger
// history stays. The Tenant watch wakes the token when the tenant is ready.
func (r *ApiTokenReconciler) findTenant(ctx context.Context, tok *v1.ApiToken) reconciler.Result {
	tenant, err := readyTenant(ctx, r.Client, tok.Namespace)
	if err != nil {
		return reconciler.Kept(err)
	}
	if tenant == nil {
		if tok.Status.TokenID != 0 {
			tok.Status.State = v1.TokenDisabled
		}
		return reconciler.NotDone(v1.ReasonTenantNotReady, "no ready Tenant in namespace %s", tok.Namespace)
	}
	tok.Status.UserID = tenant.Status.UserID
	return reconciler.Done(v1.ReasonReconciled, "tenant %s is ready", tenant.Name)
}

// readyTenant returns the namespace's Tenant once it has a user ID, or nil.
func readyTenant(ctx context.Context, c client.Client, namespace string) (*v1.Tenant, error) {
	list := &v1.TenantList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	for i := range list.Items {
		t := &list.Items[i]
		if t.Status.UserID != 0 && meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady) {
			return t, nil
		}
	}
	return nil, nil
}

// register creates the ledger row (the starting balance applies only then)
// and keeps the limits in line with the spec. The registration comes from
// tokenspec.For, as the gateway's and POST /v1/tokens' do: whichever of them
// registers the token first, the row starts the same.
func (r *ApiTokenReconciler) register(ctx context.Context, tok *v1.ApiToken) reconciler.Result {
	registered := tok.Status.TokenID != 0
	spec, err := tokenspec.For(tok, tok.Status.UserID)
	if err != nil {
		return stepFailed(tok, registered, specError{err})
	}
	if last, ok := r.registered.Load(tok.UID); ok && registered && last == (registration{spec, tok.Status.TokenID}) {
		return reconciler.Done(v1.ReasonReconciled, "registered in the ledger as token %d", tok.Status.TokenID)
	}
	id, err := r.Ledger.EnsureToken(ctx, spec)
	if err != nil {
		return stepFailed(tok, registered, ledgerError{err})
	}
	if err := r.Ledger.UpdateTokenLimits(ctx, id, spec.TokenLimits); err != nil {
		return stepFailed(tok, registered, ledgerError{err})
	}
	if tok.Status.TokenID != id {
		recorder{R: r.Events}.Normal(tok, v1.EventTokenRegistered, "Register", "registered in the ledger as token %d", id)
	}
	tok.Status.TokenID = id
	r.registered.Store(tok.UID, registration{spec, id})
	return reconciler.Done(v1.ReasonReconciled, "registered in the ledger as token %d", id)
}

// mirrorUsage copies the ledger's view of the token into status at most once
// per UsageSyncPeriod, and says when to look again.
func (r *ApiTokenReconciler) mirrorUsage(ctx context.Context, tok *v1.ApiToken) reconciler.Result {
	period := r.UsageSyncPeriod
	if period <= 0 {
		period = DefaultBalanceSyncPeriod
	}
	now := r.Clock.Now()
	mirrored := reconciler.Done(v1.ReasonReconciled, "usage mirrored from the ledger every %s at most", period)
	if last := tok.Status.UsageSyncedAt; last != nil && now.Sub(last.Time) < period {
		return mirrored.After(period - now.Sub(last.Time))
	}
	b, h, err := r.Ledger.TokenStanding(ctx, tok.Status.TokenID)
	if err != nil {
		return stepFailed(tok, true, ledgerError{err})
	}
	// Quota leased to gateway replicas is held, not spent.
	st := &tok.Status
	remain, used := int64(b.Remain+h.Leased), int64(b.Used)
	var accessed *metav1.Time
	if b.AccessedTime > 0 {
		at := metav1.NewTime(time.Unix(b.AccessedTime, 0))
		accessed = &at
	}
	// Written only when a figure moved: an idle key costs no status write
	// (and no watch event for every gateway) per period.
	if st.UsageSyncedAt != nil && st.RemainQuota == remain && st.UsedQuota == used && accessed.Equal(st.AccessedAt) {
		return mirrored.After(period)
	}
	if wait := r.mirrors.turn(tok.UID, now); wait > 0 {
		return mirrored.After(wait) // the write waits its turn (mirrorBudget)
	}
	st.RemainQuota, st.UsedQuota = remain, used
	if accessed != nil {
		st.AccessedAt = accessed
	}
	synced := metav1.NewTime(now.Truncate(time.Second))
	st.UsageSyncedAt = &synced
	return mirrored.After(period)
}

// setState computes status.state from the spec and the mirrored usage, and
// asks for a look exactly at the expiry.
func (r *ApiTokenReconciler) setState(_ context.Context, tok *v1.ApiToken) reconciler.Result {
	now := r.Clock.Now()
	tok.Status.State = tok.StateAt(now)
	res := reconciler.Done(v1.ReasonReconciled, "state %d", tok.Status.State)
	if exp := tok.Spec.ExpiresAt; exp != nil && exp.After(now) {
		res = res.After(exp.Sub(now))
	}
	return res
}

// raiseAlerts measures spec.alerts against the ledger and raises the
// thresholds the key's balance or a limit crossed, to the tenant's webhook
// (alerts.go). Like the tenant's, it holds nothing up and does not count
// for Ready.
func (r *ApiTokenReconciler) raiseAlerts(ctx context.Context, tok *v1.ApiToken) reconciler.Result {
	if len(tok.Spec.Alerts) == 0 && len(tok.Status.Alerts) == 0 {
		return reconciler.Done(v1.ReasonReconciled, "no budget alerts")
	}
	tenant, err := readyTenant(ctx, r.Client, tok.Namespace)
	if err != nil {
		return reconciler.Kept(err)
	}
	var hook *v1.WebhookSpec
	if tenant != nil {
		hook = tenant.Spec.Webhook
	}
	f, err := r.usageFigures(ctx, tok)
	if err != nil {
		return stepFailed(tok, true, ledgerError{err})
	}
	return r.alerter().run(ctx, tok, alertInput{
		subject: budget.Subject{Object: budget.ObjectApiToken, UID: string(tok.UID), Namespace: tok.Namespace, Name: tok.Name,
			UserID: tok.Status.UserID, TokenID: tok.Status.TokenID, TokenName: tok.Spec.DisplayName},
		thresholds: budget.ForToken(tok.Spec.Alerts),
		figures:    f,
		webhook:    hook,
	})
}

// usageFigures are what the key's thresholds measure. Its balance is the
// mirror's (leases held, not spent); its quota is the ledger's invariant
// (balance + held + spent = what it started with); its use of a window is
// what the ledger counts in it less what leases hold there, which no
// request has spent.
func (r *ApiTokenReconciler) usageFigures(ctx context.Context, tok *v1.ApiToken) (budget.Figures, error) {
	u, h, err := r.Ledger.TokenStanding(ctx, tok.Status.TokenID)
	if err != nil {
		return budget.Figures{}, err
	}
	now := r.Clock.Now()
	remain := u.Remain + h.Leased
	return budget.Figures{
		Unlimited: u.Unlimited,
		Remain:    remain,
		Total:     remain + h.Reserved + u.Used,
		Day:       budget.Window{Start: budget.DayStart(now), Used: max(u.DailyUsed-h.DayLeased, 0), Limit: billing.Quota(tok.Spec.DailyQuota)},
		Month:     budget.Window{Start: budget.MonthStart(now), Used: max(u.MonthlyUsed-h.MonthLeased, 0), Limit: billing.Quota(tok.Spec.MonthlyQuota)},
	}, nil
}

func (r *ApiTokenReconciler) alerter() *alerter {
	return newAlerter(r.Client, r.APIReader, r.Events, &r.Webhooks, r.Clock, r.UsageSyncPeriod)
}

// SetupWithManager registers the reconciler. A Tenant becoming ready wakes
// every token of its namespace.
func (r *ApiTokenReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.ApiToken{}).
		Owns(&corev1.Secret{}).
		// A keySecretRef Secret is the user's, not owned: its events reach
		// exactly the tokens that name it.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.tokensReferencing)).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tokensOfTenant)).
		// Tokens are independent (each has its own ledger row and Secret):
		// several workers (DefaultConcurrency).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("apitoken").
		Complete(r)
}

// tokensReferencing maps a Secret to the tokens whose keySecretRef names it,
// through the TokenSecretRefs index.
func (r *ApiTokenReconciler) tokensReferencing(ctx context.Context, o client.Object) []reconcile.Request {
	return r.tokens(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.TokenSecretRefs: o.GetName()})
}

func (r *ApiTokenReconciler) tokensOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	return r.tokens(ctx, client.InNamespace(o.GetNamespace()))
}

// tokens lists tokens as requests; a failed list wakes none (the next
// event or resync will).
func (r *ApiTokenReconciler) tokens(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &v1.ApiTokenList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}
