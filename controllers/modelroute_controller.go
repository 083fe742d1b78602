package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// ModelRouteReconciler validates each backend of a route and publishes which
// are ready; the gateway routes only to ready backends.
type ModelRouteReconciler struct {
	Client client.Client
	// KnownProvider reports whether a provider adapter is registered.
	KnownProvider func(name string) bool
	// Upstreams, when set, checks a backend's options.assetLibrary against
	// the registered asset libraries.
	Upstreams *upstream.Registry
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
}

// +kubebuilder:rbac:groups=modelgate.io,resources=modelroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=modelgate.io,resources=modelroutes/status,verbs=get;update;patch

// Reconcile validates one ModelRoute.
func (r *ModelRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.skeleton().Reconcile(ctx, req)
}

// skeleton is the ModelRoute's reconcile. A route is Ready while at least
// one backend is: BackendsReady names the others without taking the route
// offline, and Default says which default route of the namespace is used.
func (r *ModelRouteReconciler) skeleton() *reconciler.Reconciler[*v1.ModelRoute] {
	return &reconciler.Reconciler[*v1.ModelRoute]{
		Client: r.Client,
		New:    func() *v1.ModelRoute { return &v1.ModelRoute{} },
		Steps: []reconciler.Step[*v1.ModelRoute]{
			{Condition: v1.ConditionBackendsReady, Informational: true, Run: r.checkBackends},
			{Condition: v1.ConditionDefault, Informational: true, Run: r.checkDefault},
			{Run: serving},
		},
		ReadyMessage: func(rt *v1.ModelRoute) string {
			return fmt.Sprintf("%d of %d backends are ready", rt.Status.ReadyBackends, len(rt.Status.Backends))
		},
	}
}

// checkBackends decides each backend's readiness into status.backends. An
// API error publishes no guess: the route keeps what it had and is retried.
func (r *ModelRouteReconciler) checkBackends(ctx context.Context, route *v1.ModelRoute) reconciler.Result {
	statuses := make([]v1.BackendStatus, 0, len(route.Spec.Backends))
	var errs []error
	for _, b := range route.Spec.Backends {
		st, err := r.checkBackend(ctx, route.Namespace, b)
		if err != nil {
			errs = append(errs, err)
		}
		statuses = append(statuses, st)
	}
	if err := errors.Join(errs...); err != nil {
		return reconciler.Kept(err)
	}
	return setBackends(route, statuses)
}

// setBackends publishes the backends' readiness and says which are not
// ready and why.
func setBackends(route *v1.ModelRoute, statuses []v1.BackendStatus) reconciler.Result {
	route.Status.Backends = statuses
	var ready int32
	var notReady []string
	for _, s := range statuses {
		if s.Ready {
			ready++
			continue
		}
		notReady = append(notReady, fmt.Sprintf("%s: %s (%s)", s.Name, s.Reason, s.Message))
	}
	route.Status.ReadyBackends = ready
	switch {
	case len(notReady) == 0:
		return reconciler.Done(v1.ReasonReconciled, "every backend is ready")
	case ready == 0:
		return reconciler.NotDone(v1.ReasonNoReadyBackend, "no backend is ready: %s", strings.Join(notReady, "; "))
	default:
		return reconciler.NotDone(v1.ReasonSomeBackendsFailed, "%d of %d backends are not ready: %s",
			len(notReady), len(statuses), strings.Join(notReady, "; "))
	}
}

// serving is what makes a route Ready: the gateway routes only to ready
// backends, so it needs one.
func serving(_ context.Context, route *v1.ModelRoute) reconciler.Result {
	if route.Status.ReadyBackends == 0 {
		return reconciler.NotDone(v1.ReasonNoReadyBackend, "no backend is ready; see BackendsReady and status.backends")
	}
	return reconciler.Done(v1.ReasonReconciled, "serving")
}

// checkDefault reports on a defaultModel route whether it is the default of
// its type in its namespace (routing.PickDefault, the rule the gateway
// applies); other routes carry no Default condition.
func (r *ModelRouteReconciler) checkDefault(ctx context.Context, route *v1.ModelRoute) reconciler.Result {
	if !route.Spec.DefaultModel {
		return reconciler.NotApplicable()
	}
	list := &v1.ModelRouteList{}
	if err := r.Client.List(ctx, list, client.InNamespace(route.Namespace)); err != nil {
		return reconciler.Kept(err)
	}
	winner := routing.PickDefault(list.Items, route.Spec.Type)
	if winner == nil || winner.Name == route.Name {
		return reconciler.Done(v1.ReasonDefault, "requests without a model use %s for %s", route.Spec.Model, route.Spec.Type)
	}
	return reconciler.NotDone(v1.ReasonDefaultTaken,
		"ModelRoute %s (model %s) is the older default %s route of this namespace; requests without a model use it",
		winner.Name, winner.Spec.Model, route.Spec.Type)
}

// checkBackend decides one backend's readiness; an error means it could not
// be decided (the API server failed), not that the backend is bad.
func (r *ModelRouteReconciler) checkBackend(ctx context.Context, ns string, b v1.Backend) (v1.BackendStatus, error) {
	st := v1.BackendStatus{Name: b.Name}
	switch {
	case b.Disabled:
		st.Reason, st.Message = v1.ReasonBackendDisabled, "backend is disabled"
		return st, nil
	case r.KnownProvider != nil && !r.KnownProvider(b.Provider):
		st.Reason, st.Message = v1.ReasonUnknownProvider, fmt.Sprintf("provider %q is not known to this gateway", b.Provider)
		return st, nil
	}
	if b.BaseURL != "" {
		if u, err := url.Parse(b.BaseURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			st.Reason, st.Message = v1.ReasonInvalidBaseURL, "baseURL must be an absolute http or https URL"
			return st, nil
		}
	}
	if msg := r.assetLibraryProblem(b); msg != "" {
		st.Reason, st.Message = v1.ReasonInvalidAssetLibrary, msg
		return st, nil
	}
	if ref := b.CredentialSecretRef; ref != nil {
		ok, err := secretHasKey(ctx, r.Client, ns, ref.Name, ref.Key)
		if err != nil {
			return st, err
		}
		if !ok {
			st.Reason, st.Message = v1.ReasonCredentialMissing, fmt.Sprintf("Secret %s has no key %q", ref.Name, ref.Key)
			return st, nil
		}
	}
	st.Ready, st.Reason = true, v1.ReasonBackendReady
	return st, nil
}

// assetLibraryProblem says what is wrong with a backend's explicit
// options.assetLibrary, or "". A private asset review would otherwise be
// skipped without a word (a misspelt name) or send another library's
// references to a vendor that cannot read them.
func (r *ModelRouteReconciler) assetLibraryProblem(b v1.Backend) string {
	if r.Upstreams == nil {
		return ""
	}
	if _, err := r.Upstreams.AssetLibrary(upstream.Backend{Name: b.Name, Provider: b.Provider, Options: b.Options}); err != nil {
		return err.Error()
	}
	return ""
}

func secretHasKey(ctx context.Context, c client.Client, ns, name, key string) (bool, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return len(s.Data[key]) > 0, nil
}

// SetupWithManager registers the reconciler; a Secret change wakes the
// routes that name it.
func (r *ModelRouteReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.ModelRoute{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.routesReferencing)).
		// A default route that comes, changes or goes settles the other
		// defaults of its namespace.
		Watches(&v1.ModelRoute{}, handler.EnqueueRequestsFromMapFunc(r.defaultsOfNamespace)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("modelroute").
		Complete(r)
}

func (r *ModelRouteReconciler) defaultsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	if rt, ok := o.(*v1.ModelRoute); !ok || !rt.Spec.DefaultModel {
		return nil
	}
	list := &v1.ModelRouteList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, rt := range list.Items {
		if rt.Spec.DefaultModel && rt.Name != o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rt)})
		}
	}
	return reqs
}

// routesReferencing maps a Secret to the routes whose backends name it (a
// credential may have appeared or gone), through the RouteSecretRefs index.
func (r *ModelRouteReconciler) routesReferencing(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1.ModelRouteList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{index.RouteSecretRefs: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rt := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rt)})
	}
	return reqs
}
