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
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/pricing"
)

// PriceRule reasons.
const (
	ReasonPublished = "Published"
	ReasonInvalid   = "Invalid"
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
	rule := &v1.PriceRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rule.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := rule.DeepCopy()
	gen := rule.Generation
	rule.Status.ConflictsWith = ""
	if err := pricing.ValidateSpec(&rule.Spec); err != nil {
		r.refuse(rule, ReasonInvalid, err.Error())
	} else if other, err := r.olderOverlap(ctx, rule); err != nil {
		return ctrl.Result{}, err
	} else if other != "" {
		rule.Status.ConflictsWith = other
		r.refuse(rule, v1.ReasonConflict, fmt.Sprintf(
			"PriceRule %q already prices model %s for group %s under the same conditions; delete one or make their conditions differ",
			other, rule.Spec.Model, pricing.GroupOf(&rule.Spec)))
	} else {
		setCondition(&rule.Status.Conditions, gen, v1.ConditionAccepted, true, v1.ReasonReconciled, "the rule is valid and overlaps no other")
		setCondition(&rule.Status.Conditions, gen, v1.ConditionPublished, true, ReasonPublished, "the rule is served and billed")
	}
	rule.Status.ObservedGeneration = gen
	return ctrl.Result{}, patchStatusIfChanged(ctx, r.Client, before, rule)
}

func (r *PriceRuleReconciler) refuse(rule *v1.PriceRule, reason, msg string) {
	gen := rule.Generation
	setCondition(&rule.Status.Conditions, gen, v1.ConditionAccepted, false, reason, msg)
	setCondition(&rule.Status.Conditions, gen, v1.ConditionPublished, false, reason, "not published: "+msg)
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
