package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// DefaultBalanceSyncPeriod bounds how often ledger balances are mirrored into status.
const DefaultBalanceSyncPeriod = 30 * time.Second

// TenantReconciler registers tenants in the ledger, applies grants once,
// keeps the usage-API access token and mirrors the balance into status.
type TenantReconciler struct {
	Client client.Client
	Ledger Ledger
	Clock  clock.PassiveClock
	// BalanceSyncPeriod bounds status writes of the mirrored balance.
	BalanceSyncPeriod time.Duration
	// Events records registration and grants (nil: none).
	Events events.EventRecorder
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
	// APIReader reads a Tenant from the API server, not the cache, before
	// a budget alert is raised (mgr.GetAPIReader(); nil: Client).
	APIReader client.Reader
	// Webhooks sends budget alerts to spec.webhook (the zero value is ready).
	Webhooks webhook.Sender
	// Guard judges spec.webhook's address (the process's
	// --allow-private-networks; nil: public addresses only).
	Guard *netguard.Guard

	// mirrors spreads the balance mirror's status writes (Setup: shared
	// with the ApiToken mirror; nil: no bound).
	mirrors *mirrorBudget
}

// +kubebuilder:rbac:groups=modelgate.io,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile brings one Tenant's ledger record, grants and access token in line with its spec.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.skeleton().Reconcile(ctx, req)
}

// skeleton is the Tenant's reconcile: one condition per step a user needs
// to tell apart. A grant that cannot be applied is reported but leaves the
// tenant Ready: its keys go on working on the balance it has.
func (r *TenantReconciler) skeleton() *reconciler.Reconciler[*v1.Tenant] {
	return &reconciler.Reconciler[*v1.Tenant]{
		Client:    r.Client,
		New:       func() *v1.Tenant { return &v1.Tenant{} },
		Finalizer: v1.LedgerFinalizer,
		Finalize:  r.disableKeys,
		Steps: []reconciler.Step[*v1.Tenant]{
			// First: it needs nothing else, so nothing else can hold it up.
			{Condition: v1.ConditionWebhookReady, Informational: true, Run: r.checkWebhook},
			{Run: r.refuseDuplicate},
			{Condition: v1.ConditionRegistered, Run: r.register},
			{Condition: v1.ConditionGrantsApplied, Informational: true, Run: r.applyGrants},
			{Condition: v1.ConditionAccessTokenReady, Independent: true, Run: r.ensureAccessToken},
			{Run: r.mirrorBalance},
			{Informational: true, Run: r.raiseAlerts},
		},
		ReadyMessage:   func(*v1.Tenant) string { return "tenant is registered and its access token is ready" },
		MoreConditions: setLedgerSynced,
	}
}

// disableKeys is what deleting a tenant does to the ledger: every key of it
// reserves nothing more and every lease on them returns. The balance,
// grants and usage rows stay (a tenant re-created in the namespace is a new
// ledger account: its UID differs).
func (r *TenantReconciler) disableKeys(ctx context.Context, t *v1.Tenant) error {
	r.mirrors.forget(t.UID)
	if t.Status.UserID == 0 {
		return nil // never registered
	}
	returned, err := r.Ledger.DisableTenantTokens(ctx, t.Status.UserID)
	if err != nil {
		return ledgerError{err}
	}
	log.FromContext(ctx).Info("deleted tenant's keys disabled in the ledger", "userID", t.Status.UserID, "leaseQuotaReturned", int64(returned))
	return nil
}

// checkWebhook tells the tenant up front whether its webhook URL may be
// called: a URL to an internal address (loopback, private, link-local,
// metadata, ...) gets WebhookReady=False and is never called. The message
// names no address. The check is repeated on every delivery, on the address
// actually dialed.
func (r *TenantReconciler) checkWebhook(ctx context.Context, t *v1.Tenant) reconciler.Result {
	if t.Spec.Webhook == nil {
		return reconciler.NotApplicable()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second) // a slow resolver must not hold the reconcile
	defer cancel()
	if err := r.Guard.Resolve(ctx, nil, t.Spec.Webhook.URL); err != nil {
		if errors.Is(err, netguard.ErrForbidden) {
			return reconciler.NotDone(v1.ReasonForbiddenAddress, "webhook URL refused: %s; no task or alert webhook will be sent", netguard.Reason(err))
		}
		return reconciler.NotDone(v1.ReasonUnresolvable, "webhook host: %s; no task or alert webhook will be sent", err.Error())
	}
	return reconciler.Done(v1.ReasonReconciled, "task and alert webhooks go to a public address")
}

// refuseDuplicate holds up every other step of a second Tenant in a
// namespace: the older one wins, the newer is never registered.
func (r *TenantReconciler) refuseDuplicate(ctx context.Context, t *v1.Tenant) reconciler.Result {
	other, err := r.olderTenant(ctx, t)
	switch {
	case err != nil:
		return reconciler.Kept(err)
	case other != "":
		return reconciler.NotDone(v1.ReasonDuplicateTenant,
			"namespace %s already has Tenant %q; only one Tenant may live in a namespace", t.Namespace, other)
	}
	return reconciler.Done(v1.ReasonReconciled, "the only Tenant of its namespace")
}

// olderTenant returns the name of another Tenant of the namespace that came
// first (by creation time, then name), which makes t the refused duplicate.
func (r *TenantReconciler) olderTenant(ctx context.Context, t *v1.Tenant) (string, error) {
	list := &v1.TenantList{}
	if err := r.Client.List(ctx, list, client.InNamespace(t.Namespace)); err != nil {
		return "", fmt.Errorf("list tenants: %w", err)
	}
	for _, o := range list.Items {
		if o.Name == t.Name || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if o.CreationTimestamp.Before(&t.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&t.CreationTimestamp) && o.Name < t.Name) {
			return o.Name, nil
		}
	}
	return "", nil
}

func (r *TenantReconciler) register(ctx context.Context, t *v1.Tenant) reconciler.Result {
	registered := t.Status.UserID != 0
	id, err := r.Ledger.EnsureTenant(ctx, string(t.UID), t.Namespace, t.Name)
	if err != nil {
		return stepFailed(t, registered, ledgerError{err})
	}
	if t.Status.UserID != id {
		recorder{R: r.Events}.Normal(t, v1.EventTenantRegistered, "Register", "registered in the ledger as user %d", id)
	}
	t.Status.UserID = id
	if err := r.Ledger.SetTenantUnlimited(ctx, id, t.Spec.UnlimitedQuota); err != nil {
		return stepFailed(t, registered, ledgerError{err})
	}
	credit, err := creditLimitQuota(t.Spec.CreditLimit)
	if err != nil {
		return stepFailed(t, registered, specError{err})
	}
	if err := r.Ledger.SetTenantCreditLimit(ctx, id, credit); err != nil {
		return stepFailed(t, registered, ledgerError{err})
	}
	t.Status.CreditLimitQuota = int64(credit)
	return reconciler.Done(v1.ReasonReconciled, "registered in the ledger as user %d", id)
}

// applyGrants applies every grant of the spec not yet applied. The ledger
// keys grants by ID, so a grant applied before a lost status write is not
// applied twice. A grant the controller cannot use does not hold up the
// others.
func (r *TenantReconciler) applyGrants(ctx context.Context, t *v1.Tenant) reconciler.Result {
	var refused []error
	for _, g := range t.Spec.Grants {
		if slices.Contains(t.Status.AppliedGrants, g.ID) {
			continue
		}
		amount, err := grantQuota(g)
		if err != nil {
			refused = append(refused, fmt.Errorf("grant %q: %w", g.ID, err))
			continue
		}
		applied, err := r.Ledger.ApplyGrant(ctx, t.Status.UserID, g.ID, amount)
		if err != nil {
			return stepFailed(t, true, ledgerError{fmt.Errorf("apply grant %q: %w", g.ID, err)})
		}
		if applied { // not when only a lost status write is being repaired
			recorder{R: r.Events}.Normal(t, v1.EventGrantApplied, "ApplyGrant", "grant %s added %d quota", g.ID, int64(amount))
		}
		t.Status.AppliedGrants = append(t.Status.AppliedGrants, g.ID)
		log.FromContext(ctx).Info("applied grant", "grant", g.ID, "quota", int64(amount))
	}
	if len(refused) > 0 {
		return stepFailed(t, true, specError{errors.Join(refused...)})
	}
	return reconciler.Done(v1.ReasonReconciled, "every grant of the spec is applied")
}

// creditLimitQuota is spec.creditLimit in quota (0 when unset).
func creditLimitQuota(c *v1.Decimal) (billing.Quota, error) {
	if c == nil {
		return 0, nil
	}
	q, err := billing.QuotaFromCreditsText(string(*c))
	if err != nil {
		return 0, fmt.Errorf("creditLimit: %w", err)
	}
	return q, nil
}

func grantQuota(g v1.Grant) (billing.Quota, error) {
	if g.Quota != nil {
		return billing.Quota(*g.Quota), nil
	}
	if g.Credits == nil {
		return 0, errors.New("neither credits nor quota is set")
	}
	q, err := billing.QuotaFromCreditsText(string(*g.Credits))
	if err == nil && q <= 0 {
		// Recorded as applied it would add nothing, and its ID could never
		// be used for the amount that was meant.
		return 0, fmt.Errorf("%s credits round to no quota (1 credit = 2500 quota)", *g.Credits)
	}
	return q, err
}

// ensureAccessToken keeps one access token in a Secret owned by the tenant.
// The Secret is the record of the current token: its annotation says which
// spec.accessTokenRotation it was made for, and status only mirrors its hash.
// A new token is generated only when the rotation counter moved past the
// Secret's or the Secret (or its token) went missing; the old hash is replaced
// at once, so the previous token stops working on the next cache sync of the
// gateways. Deciding from status instead would let a reconcile that reads a
// Tenant older than its own last status write replace a token that was just
// handed out.
func (r *TenantReconciler) ensureAccessToken(ctx context.Context, t *v1.Tenant) reconciler.Result {
	name := t.Name + "-access-token"
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return retryLater(t, v1.ReasonSecretUnavailable, fmt.Errorf("get access-token Secret %s: %w", name, err))
	}
	current := string(secret.Data[v1.AccessTokenSecretKey])
	if rotation, ok := secretRotation(secret, t); err == nil && current != "" && ok && rotation >= t.Spec.AccessTokenRotation {
		return r.accessTokenIs(t, name, current, rotation)
	}
	token, err := keys.NewAccessToken()
	if err != nil {
		return retryLater(t, v1.ReasonSecretUnavailable, err)
	}
	secret.Name, secret.Namespace = name, t.Namespace
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{v1.AccessTokenSecretKey: []byte(token)}
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, v1.AccessTokenRotationAnnotation, strconv.FormatInt(t.Spec.AccessTokenRotation, 10))
		return controllerutil.SetControllerReference(t, secret, r.Client.Scheme())
	}); err != nil {
		return retryLater(t, v1.ReasonSecretUnavailable, fmt.Errorf("write access-token Secret %s: %w", name, err))
	}
	return r.accessTokenIs(t, name, token, t.Spec.AccessTokenRotation)
}

// accessTokenIs mirrors the token in the Secret into status.
func (r *TenantReconciler) accessTokenIs(t *v1.Tenant, secretName, token string, rotation int64) reconciler.Result {
	t.Status.AccessTokenSecretName = secretName
	t.Status.AccessTokenHash = keys.Hash(token)
	t.Status.AccessTokenRotation = rotation
	return reconciler.Done(v1.ReasonReconciled, "access token in Secret %s (rotation %d)", secretName, rotation)
}

// secretRotation is the rotation an access-token Secret was made for. A
// Secret written before the annotation existed counts as current when status
// holds its hash.
func secretRotation(secret *corev1.Secret, t *v1.Tenant) (int64, bool) {
	if v, ok := secret.Annotations[v1.AccessTokenRotationAnnotation]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	token := string(secret.Data[v1.AccessTokenSecretKey])
	if token != "" && t.Status.AccessTokenHash == keys.Hash(token) {
		return t.Status.AccessTokenRotation, true
	}
	return 0, false
}

// mirrorBalance copies the ledger balance into status at most once per
// BalanceSyncPeriod, only when it moved, and says when to look again.
func (r *TenantReconciler) mirrorBalance(ctx context.Context, t *v1.Tenant) reconciler.Result {
	period := r.BalanceSyncPeriod
	if period <= 0 {
		period = DefaultBalanceSyncPeriod
	}
	now := r.Clock.Now()
	mirrored := reconciler.Done(v1.ReasonReconciled, "balance mirrored")
	if last := t.Status.BalanceSyncedAt; last != nil && now.Sub(last.Time) < period {
		return mirrored.After(period - now.Sub(last.Time))
	}
	b, leased, _, err := r.Ledger.TenantStanding(ctx, t.Status.UserID)
	if err != nil {
		return stepFailed(t, true, ledgerError{err})
	}
	// Quota leased to gateway replicas is held, not spent.
	remain, used := int64(b.Remain+leased), int64(b.Used)
	// Written only when a figure moved: an idle tenant costs no status write
	// (and no watch event for every gateway) per period.
	if t.Status.BalanceSyncedAt == nil || t.Status.RemainQuota != remain || t.Status.UsedQuota != used {
		if wait := r.mirrors.turn(t.UID, now); wait > 0 {
			return mirrored.After(wait) // the write waits its turn (mirrorBudget)
		}
		t.Status.RemainQuota, t.Status.UsedQuota = remain, used
		synced := metav1.NewTime(now.Truncate(time.Second))
		t.Status.BalanceSyncedAt = &synced
	}
	return mirrored.After(period)
}

// raiseAlerts measures spec.alerts against the ledger and raises the
// thresholds the balance crossed (alerts.go). It holds nothing up and does
// not count for Ready: an alert that cannot be sent yet is retried, never a
// reason to take the tenant's keys offline.
func (r *TenantReconciler) raiseAlerts(ctx context.Context, t *v1.Tenant) reconciler.Result {
	if len(t.Spec.Alerts) == 0 && len(t.Status.Alerts) == 0 {
		return reconciler.Done(v1.ReasonReconciled, "no budget alerts")
	}
	f, err := r.balanceFigures(ctx, t.Status.UserID)
	if err != nil {
		return stepFailed(t, true, ledgerError{err})
	}
	return r.alerter().run(ctx, t, alertInput{
		subject: budget.Subject{Object: budget.ObjectTenant, UID: string(t.UID), Namespace: t.Namespace, Name: t.Name,
			UserID: t.Status.UserID},
		thresholds: budget.ForTenant(t.Spec.Alerts),
		figures:    f,
		webhook:    t.Spec.Webhook,
	})
}

// balanceFigures are what the tenant's thresholds measure: its balance as
// the mirror shows it (leases held, not spent) against its grants.
func (r *TenantReconciler) balanceFigures(ctx context.Context, userID int64) (budget.Figures, error) {
	b, leased, granted, err := r.Ledger.TenantStanding(ctx, userID)
	if err != nil {
		return budget.Figures{}, err
	}
	return budget.Figures{Unlimited: b.Unlimited, Remain: b.Remain + leased, Total: granted}, nil
}

func (r *TenantReconciler) alerter() *alerter {
	return newAlerter(r.Client, r.APIReader, r.Events, &r.Webhooks, r.Clock, r.BalanceSyncPeriod)
}

// SetupWithManager registers the reconciler; Secrets it owns wake it.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Tenant{}).
		Owns(&corev1.Secret{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("tenant").
		Complete(r)
}
