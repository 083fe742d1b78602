package routing

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
)

// indexModel is the informer indexer name of RouteIndex.
const indexModel = "modelgate.io/route-model"

// RouteIndex finds ModelRoutes by model with an indexer registered on the
// ModelRoute informer itself: one map access returning the cache's own
// objects, without the list building, reflection and field-selector parsing
// of a cache List.
type RouteIndex struct {
	ix toolscache.Indexer
}

// NewRouteIndex registers the index on the cache's ModelRoute informer. Call
// it before the cache starts.
func NewRouteIndex(ctx context.Context, c ctrlcache.Cache) (*RouteIndex, error) {
	ix, err := index.InformerIndexer(ctx, c, &v1.ModelRoute{}, toolscache.Indexers{indexModel: func(obj any) ([]string, error) {
		if r, ok := obj.(*v1.ModelRoute); ok && r.Spec.Model != "" {
			return []string{string(r.Spec.Model)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, err
	}
	return &RouteIndex{ix: ix}, nil
}

// route returns the route of model in the tenant's namespace, else the
// platform's (nil when neither exists).
func (x *RouteIndex) route(tenantNamespace, systemNamespace, model string) (*v1.ModelRoute, error) {
	items, err := x.ix.ByIndex(indexModel, model)
	if err != nil {
		return nil, fmt.Errorf("routes of %s: %w", model, err)
	}
	var platform *v1.ModelRoute
	for _, it := range items {
		rt, ok := it.(*v1.ModelRoute)
		if !ok {
			continue
		}
		switch rt.Namespace {
		case tenantNamespace:
			return rt, nil
		case systemNamespace:
			platform = rt
		}
	}
	return platform, nil
}
