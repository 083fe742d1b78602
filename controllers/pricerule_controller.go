package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/pricing"
)

// PriceRuleReconciler validates price rules, rejects a rule that overlaps an
// older one (same namespace, model, group and conditions), and publishes the
// accepted ones; only published rules are served and billed.
type PriceRuleReconciler struct {
	Client client.Client
	// Workers is the number of concurrent reconciles (Setup: Options.Concurrency).
	Workers int
}

// +kubebuilder:rbac:groups=modelgate.io,resources=pricerules,verbs=get;list;watch
// +kubebuilder:rbac:groups=modelgate.io,resources=pricerules/status,verbs=get;update;patch

// Reconcile decides whether one PriceRule is published.
func (r *PriceRuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.skeleton().Reconcile(ctx, req)
}

// skeleton is the PriceRule's reconcile: Accepted says whether the spec can
// be evaluated, Published whether the rule is in the catalog (served and
// billed) or shadowed by an older rule it overlaps.
func (r *PriceRuleReconciler) skeleton() *reconciler.Reconciler[*v1.PriceRule] {
	return &reconciler.Reconciler[*v1.PriceRule]{
		Client: r.Client,
		New:    func() *v1.PriceRule { return &v1.PriceRule{} },
		Steps: []reconciler.Step[*v1.PriceRule]{
			{Condition: v1.ConditionAccepted, Run: accept},
			{Condition: v1.ConditionPublished, Run: r.publish},
		},
		ReadyMessage: func(*v1.PriceRule) string { return "the rule is served and billed" },
	}
}

// accept checks that the evaluator can use the spec (pricing.ValidateSpec).
func accept(_ context.Context, rule *v1.PriceRule) reconciler.Result {
	if err := pricing.ValidateSpec(&rule.Spec); err != nil {
		return reconciler.NotDone(v1.ReasonInvalid, "%s", err.Error())
	}
	return reconciler.Done(v1.ReasonReconciled, "the spec is valid")
}

// publish puts the rule in the catalog unless an older rule of the
// namespace already prices the same requests.
func (r *PriceRuleReconciler) publish(ctx context.Context, rule *v1.PriceRule) reconciler.Result {
	rule.Status.ConflictsWith = ""
	other, err := r.olderOverlap(ctx, rule)
	switch {
	case err != nil:
		return reconciler.Kept(err)
	case other != "":
		rule.Status.ConflictsWith = other
		return reconciler.NotDone(v1.ReasonConflict,
			"PriceRule %q already prices model %s for group %s under the same conditions; delete one or make their conditions differ",
			other, rule.Spec.Model, pricing.GroupOf(&rule.Spec))
	}
	return reconciler.Done(v1.ReasonPublished, "the rule is served and billed")
}

// olderOverlap names an older rule of the same namespace that overlaps rule
// (by creation time, then name): the later rule is the one refused, so
// adding a duplicate never unpublishes the price in force.
func (r *PriceRuleReconciler) olderOverlap(ctx context.Context, rule *v1.PriceRule) (string, error) {
	list := &v1.PriceRuleList{}
	if err := r.Client.List(ctx, list, client.InNamespace(rule.Namespace),
		client.MatchingFields{index.PriceModel: string(rule.Spec.Model)}); err != nil {
		return "", fmt.Errorf("list price rules: %w", err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == rule.Name || !o.DeletionTimestamp.IsZero() || !pricing.Overlaps(o.Spec, rule.Spec) {
			continue
		}
		if o.CreationTimestamp.Before(&rule.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&rule.CreationTimestamp) && o.Name < rule.Name) {
			return o.Name, nil
		}
	}
	return "", nil
}

// SetupWithManager registers the reconciler; a rule's change or deletion
// wakes the other rules of its model (a conflict may have been resolved).
func (r *PriceRuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.PriceRule{}).
		Watches(&v1.PriceRule{}, handler.EnqueueRequestsFromMapFunc(r.sameModel)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Named("pricerule").
		Complete(r)
}

func (r *PriceRuleReconciler) sameModel(ctx context.Context, o client.Object) []reconcile.Request {
	rule := o.(*v1.PriceRule)
	list := &v1.PriceRuleList{}
	if err := r.Client.List(ctx, list, client.InNamespace(rule.Namespace),
		client.MatchingFields{index.PriceModel: string(rule.Spec.Model)}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		if p.Name != rule.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return reqs
}
