package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// ApiToken reasons.
const (
	ReasonTenantNotReady = "TenantNotReady"
	ReasonKeyInvalid     = "KeyInvalid"
)

// APIKeySecretKey is the data key of the Secret a generated API key is written to.
const APIKeySecretKey = "key"

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
}

// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=modelgate.io,resources=apitokens/finalizers,verbs=update

// Reconcile provisions one ApiToken.
func (r *ApiTokenReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tok := &v1.ApiToken{}
	if err := r.Client.Get(ctx, req.NamespacedName, tok); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tok.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, finalize(ctx, r.Client, tok, func(ctx context.Context) error { return r.disable(ctx, tok) })
	}
	if added, err := ensureFinalizer(ctx, r.Client, tok); added || err != nil {
		return ctrl.Result{}, err
	}
	before := tok.DeepCopy()
	res, err := r.reconcile(ctx, tok)
	if perr := patchStatusIfChanged(ctx, r.Client, before, tok); perr != nil {
		err = errors.Join(err, perr)
	}
	return res, err
}

// disable is what deleting a key does to the ledger: it reserves nothing
// more, its leases go back to its balances, its rows stay. The gateways stop
// authenticating it as soon as their caches see the deletion.
func (r *ApiTokenReconciler) disable(ctx context.Context, tok *v1.ApiToken) error {
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

func (r *ApiTokenReconciler) reconcile(ctx context.Context, tok *v1.ApiToken) (ctrl.Result, error) {
	gen := tok.Generation
	tenant, err := readyTenant(ctx, r.Client, tok.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if tenant == nil {
		// Without its tenant (not ready yet, or deleted) a key cannot be used;
		// its ledger history stays. The Tenant watch wakes us when it is ready.
		if tok.Status.TokenID != 0 {
			tok.Status.State = v1.TokenDisabled
		}
		setCondition(&tok.Status.Conditions, gen, v1.ConditionReady, false, ReasonTenantNotReady,
			"no ready Tenant in namespace "+tok.Namespace)
		return ctrl.Result{}, nil
	}
	tok.Status.UserID = tenant.Status.UserID
	if err := r.ensureKey(ctx, tok); err != nil {
		var se specError
		if errors.As(err, &se) {
			setCondition(&tok.Status.Conditions, gen, v1.ConditionReady, false, ReasonKeyInvalid, err.Error())
			return ctrl.Result{}, nil // fixed by a spec or Secret change, which wakes us
		}
		return ctrl.Result{}, err
	}
	registered := tok.Status.TokenID != 0
	if err := r.register(ctx, tok); err != nil {
		markFailure(&tok.Status.Conditions, gen, registered, err)
		return ctrl.Result{}, err
	}
	next, err := r.mirrorUsage(ctx, tok)
	if err != nil {
		markFailure(&tok.Status.Conditions, gen, registered, ledgerError{err})
		return ctrl.Result{}, err
	}
	markSynced(&tok.Status.Conditions, gen)
	now := r.Clock.Now()
	tok.Status.State = tok.StateAt(now)
	setCondition(&tok.Status.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled, "key is provisioned and registered")
	tok.Status.ObservedGeneration = gen
	if exp := tok.Spec.ExpiresAt; exp != nil && exp.After(now) && exp.Sub(now) < next {
		next = exp.Sub(now) // requeue exactly at expiry
	}
	return ctrl.Result{RequeueAfter: next}, nil
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

// ensureKey sets status.keyHash from the key the token uses: a hash given in
// the spec, a referenced Secret, or a generated key written once into a
// Secret the token owns.
func (r *ApiTokenReconciler) ensureKey(ctx context.Context, tok *v1.ApiToken) error {
	if tok.Spec.KeyHash != "" { // made by the gateway and shown once; nothing to store
		tok.Status.SecretName = ""
		tok.Status.KeyHash, tok.Status.KeyPrefix = tok.Spec.KeyHash, tok.Spec.KeyPrefix
		return nil
	}
	if ref := tok.Spec.KeySecretRef; ref != nil {
		key, err := r.readSecretKey(ctx, tok.Namespace, ref.Name, ref.Key)
		if err != nil {
			return err
		}
		if key == "" {
			return specError{fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)}
		}
		if !keys.ValidAPIKey(key) {
			return specError{fmt.Errorf("secret %s key %q is not an API key (sk- and 48 letters or digits)", ref.Name, ref.Key)}
		}
		r.setKey(tok, ref.Name, key)
		return nil
	}
	name := tok.Name + "-key"
	key, err := r.readSecretKey(ctx, tok.Namespace, name, APIKeySecretKey)
	if err != nil {
		return err
	}
	if key == "" {
		if key, err = r.writeNewKey(ctx, tok, name); err != nil {
			return err
		}
		recorder{r.Events}.normal(tok, v1.EventKeyProvisioned, "ProvisionKey", "generated a new key into Secret %s", name)
	}
	r.setKey(tok, name, key)
	return nil
}

func (r *ApiTokenReconciler) setKey(tok *v1.ApiToken, secret, key string) {
	tok.Status.SecretName = secret
	tok.Status.KeyHash = keys.Hash(key)
	tok.Status.KeyPrefix = keys.DisplayPrefix(key)
}

// readSecretKey returns one value of a Secret, "" when the Secret or key is missing.
func (r *ApiTokenReconciler) readSecretKey(ctx context.Context, ns, name, key string) (string, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("get secret %s: %w", name, err)
	}
	return string(s.Data[key]), nil
}

// writeNewKey creates the token's key Secret. Create (not update) makes the
// write happen once: a racing reconcile gets AlreadyExists and retries.
func (r *ApiTokenReconciler) writeNewKey(ctx context.Context, tok *v1.ApiToken, name string) (string, error) {
	key, err := keys.NewAPIKey()
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tok.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "modelgate"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{APIKeySecretKey: []byte(key)},
	}
	if err := controllerutil.SetControllerReference(tok, s, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create key secret: %w", err)
	}
	return key, nil
}

// register creates the ledger row (the starting balance applies only then)
// and keeps the limits in line with the spec. The registration comes from
// tokenspec.For, as the gateway's and POST /v1/tokens' do: whichever of them
// registers the token first, the row starts the same.
func (r *ApiTokenReconciler) register(ctx context.Context, tok *v1.ApiToken) error {
	spec, err := tokenspec.For(tok, tok.Status.UserID)
	if err != nil {
		return specError{err}
	}
	id, err := r.Ledger.EnsureToken(ctx, spec)
	if err != nil {
		return ledgerError{err}
	}
	if err := r.Ledger.UpdateTokenLimits(ctx, id, spec.TokenLimits); err != nil {
		return ledgerError{err}
	}
	if tok.Status.TokenID != id {
		recorder{r.Events}.normal(tok, v1.EventTokenRegistered, "Register", "registered in the ledger as token %d", id)
	}
	tok.Status.TokenID = id
	return nil
}

// mirrorUsage copies the ledger's view of the token into status at most once
// per UsageSyncPeriod, and says when to look again.
func (r *ApiTokenReconciler) mirrorUsage(ctx context.Context, tok *v1.ApiToken) (time.Duration, error) {
	period := r.UsageSyncPeriod
	if period <= 0 {
		period = DefaultBalanceSyncPeriod
	}
	now := r.Clock.Now()
	if last := tok.Status.UsageSyncedAt; last != nil && now.Sub(last.Time) < period {
		return period - now.Sub(last.Time), nil
	}
	b, err := r.Ledger.TokenUsage(ctx, tok.Status.TokenID)
	if err != nil {
		return 0, err
	}
	leased, err := r.Ledger.TokenLeased(ctx, tok.Status.TokenID)
	if err != nil {
		return 0, err
	}
	// Quota leased to gateway replicas is held, not spent.
	st := &tok.Status
	remain, used := int64(b.Remain+leased), int64(b.Used)
	var accessed *metav1.Time
	if b.AccessedTime > 0 {
		at := metav1.NewTime(time.Unix(b.AccessedTime, 0))
		accessed = &at
	}
	// Written only when a figure moved: an idle key costs no status write
	// (and no watch event for every gateway) per period.
	if st.UsageSyncedAt != nil && st.RemainQuota == remain && st.UsedQuota == used && accessed.Equal(st.AccessedAt) {
		return period, nil
	}
	st.RemainQuota, st.UsedQuota = remain, used
	if accessed != nil {
		st.AccessedAt = accessed
	}
	synced := metav1.NewTime(now.Truncate(time.Second))
	st.UsageSyncedAt = &synced
	return period, nil
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
	list := &v1.ApiTokenList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{index.TokenSecretRefs: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}

func (r *ApiTokenReconciler) tokensOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1.ApiTokenList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}
