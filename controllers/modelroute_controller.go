package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/routing"
)

// ModelRoute backend reasons.
const (
	ReasonBackendReady       = "Ready"
	ReasonBackendDisabled    = "Disabled"
	ReasonUnknownProvider    = "UnknownProvider"
	ReasonInvalidBaseURL     = "InvalidBaseURL"
	ReasonCredentialMissing  = "CredentialMissing"
	ReasonNoReadyBackend     = "NoReadyBackend"
	ReasonSomeBackendsFailed = "SomeBackendsNotReady"
	ReasonDefault            = "Default"
	ReasonDefaultTaken       = "DefaultTaken"
)

// ModelRouteReconciler validates each backend of a route and publishes which
// are ready; the gateway routes only to ready backends.
type ModelRouteReconciler struct {
	Client client.Client
	// KnownProvider reports whether a provider adapter is registered.
	KnownProvider func(name string) bool
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
}

// +kubebuilder:rbac:groups=modelgate.io,resources=modelroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=modelgate.io,resources=modelroutes/status,verbs=get;update;patch

// Reconcile validates one ModelRoute.
func (r *ModelRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	route := &v1.ModelRoute{}
	if err := r.Client.Get(ctx, req.NamespacedName, route); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := route.DeepCopy()
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
		return ctrl.Result{}, err // API errors: retry without publishing a guess
	}
	setRouteStatus(route, statuses)
	if err := r.setDefaultCondition(ctx, route); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, patchStatusIfChanged(ctx, r.Client, before, route)
}

// setDefaultCondition reports on a defaultModel route whether it is the
// default of its type in its namespace (routing.PickDefault, the rule the
// gateway applies), and removes the condition from any other route.
func (r *ModelRouteReconciler) setDefaultCondition(ctx context.Context, route *v1.ModelRoute) error {
	if !route.Spec.DefaultModel {
		meta.RemoveStatusCondition(&route.Status.Conditions, v1.ConditionDefault)
		return nil
	}
	list := &v1.ModelRouteList{}
	if err := r.Client.List(ctx, list, client.InNamespace(route.Namespace)); err != nil {
		return err
	}
	winner := routing.PickDefault(list.Items, route.Spec.Type)
	if winner == nil || winner.Name == route.Name {
		setCondition(&route.Status.Conditions, route.Generation, v1.ConditionDefault, true, ReasonDefault,
			fmt.Sprintf("requests without a model use %s for %s", route.Spec.Model, route.Spec.Type))
		return nil
	}
	setCondition(&route.Status.Conditions, route.Generation, v1.ConditionDefault, false, ReasonDefaultTaken,
		fmt.Sprintf("ModelRoute %s (model %s) is the older default %s route of this namespace; requests without a model use it", winner.Name, winner.Spec.Model, route.Spec.Type))
	return nil
}

// checkBackend decides one backend's readiness; an error means it could not
// be decided (the API server failed), not that the backend is bad.
func (r *ModelRouteReconciler) checkBackend(ctx context.Context, ns string, b v1.Backend) (v1.BackendStatus, error) {
	st := v1.BackendStatus{Name: b.Name}
	switch {
	case b.Disabled:
		st.Reason, st.Message = ReasonBackendDisabled, "backend is disabled"
		return st, nil
	case r.KnownProvider != nil && !r.KnownProvider(b.Provider):
		st.Reason, st.Message = ReasonUnknownProvider, fmt.Sprintf("provider %q is not known to this gateway", b.Provider)
		return st, nil
	}
	if b.BaseURL != "" {
		if u, err := url.Parse(b.BaseURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			st.Reason, st.Message = ReasonInvalidBaseURL, "baseURL must be an absolute http or https URL"
			return st, nil
		}
	}
	if ref := b.CredentialSecretRef; ref != nil {
		ok, err := secretHasKey(ctx, r.Client, ns, ref.Name, ref.Key)
		if err != nil {
			return st, err
		}
		if !ok {
			st.Reason, st.Message = ReasonCredentialMissing, fmt.Sprintf("Secret %s has no key %q", ref.Name, ref.Key)
			return st, nil
		}
	}
	st.Ready, st.Reason = true, ReasonBackendReady
	return st, nil
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

// setRouteStatus computes the route's status from its backends: Ready when
// at least one backend is.
func setRouteStatus(route *v1.ModelRoute, statuses []v1.BackendStatus) {
	route.Status.Backends = statuses
	var ready int32
	for _, s := range statuses {
		if s.Ready {
			ready++
		}
	}
	route.Status.ReadyBackends = ready
	gen := route.Generation
	switch {
	case ready == 0:
		setCondition(&route.Status.Conditions, gen, v1.ConditionReady, false, ReasonNoReadyBackend, "no backend is ready; see status.backends")
	case int(ready) < len(statuses):
		setCondition(&route.Status.Conditions, gen, v1.ConditionReady, true, ReasonSomeBackendsFailed,
			fmt.Sprintf("%d of %d backends are ready; see status.backends", ready, len(statuses)))
	default:
		setCondition(&route.Status.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled, "every backend is ready")
	}
	route.Status.ObservedGeneration = gen
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
