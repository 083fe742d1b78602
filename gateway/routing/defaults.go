package routing

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// PickDefault returns the default route of typ among routes (one
// namespace's): of those with defaultModel, the oldest, then the first by
// name, so the controller that reports the choice and every gateway replica
// that acts on it agree. nil when none is marked.
func PickDefault(routes []v1.ModelRoute, typ v1.ModelType) *v1.ModelRoute {
	var best *v1.ModelRoute
	for i := range routes {
		rt := &routes[i]
		if !rt.Spec.DefaultModel || rt.Spec.Type != typ || rt.DeletionTimestamp != nil {
			continue
		}
		if best == nil || precedes(rt, best) {
			best = rt
		}
	}
	return best
}

func precedes(a, b *v1.ModelRoute) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// DefaultModel is the model an image or video request without one uses:
// the tenant's own default route of typ, else the platform's; "" when
// neither namespace marks one.
func (r *Router) DefaultModel(ctx context.Context, tenantNamespace string, typ v1.ModelType) (string, error) {
	for _, ns := range []string{tenantNamespace, r.SystemNamespace} {
		list := &v1.ModelRouteList{}
		// The cache's own objects, as Route reads them: nothing here modifies them.
		if err := r.Cache.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return "", fmt.Errorf("list routes in %s: %w", ns, err)
		}
		if rt := PickDefault(list.Items, typ); rt != nil {
			return string(rt.Spec.Model), nil
		}
	}
	return "", nil
}
