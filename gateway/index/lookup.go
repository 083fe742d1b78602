package index

import (
	"context"
	"fmt"
	"strconv"

	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Indexer names of the hot-path lookups, registered on the informers
// themselves (not through controller-runtime's field indexes) so a lookup
// is one map access returning the cache's own objects: no list building,
// no reflection, no copies.
const (
	lookupKeyHash   = "modelgate.io/key-hash"
	lookupNamespace = "modelgate.io/namespace"
	lookupUserID    = "modelgate.io/user-id"
)

// Lookup answers the gateway's authentication questions from the informer
// caches. The returned objects belong to the cache: never modify them.
type Lookup struct {
	tokens  toolscache.Indexer
	tenants toolscache.Indexer
}

// NewLookup registers the lookup indexes on the cache's informers. Call it
// before the cache starts.
func NewLookup(ctx context.Context, c ctrlcache.Cache) (*Lookup, error) {
	tokens, err := InformerIndexer(ctx, c, &v1.ApiToken{}, toolscache.Indexers{
		lookupKeyHash: func(obj any) ([]string, error) { return tokenKeyHashes(obj.(*v1.ApiToken)), nil },
	})
	if err != nil {
		return nil, err
	}
	tenants, err := InformerIndexer(ctx, c, &v1.Tenant{}, toolscache.Indexers{
		lookupNamespace: func(obj any) ([]string, error) { return []string{obj.(*v1.Tenant).Namespace}, nil },
		lookupUserID: func(obj any) ([]string, error) {
			if id := obj.(*v1.Tenant).Status.UserID; id != 0 {
				return []string{strconv.FormatInt(id, 10)}, nil
			}
			return nil, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &Lookup{tokens: tokens, tenants: tenants}, nil
}

// InformerIndexer registers ix (which may be empty) on the cache's informer
// for obj and returns the informer's own indexer: reads from it are map
// accesses that return the cache's objects, never copies — the hot path's
// way to read the cache. Call it before the cache starts. An index the
// informer already has by that name is kept: it was registered by this
// code for another gateway on the same cache (several replicas in one
// process, as the load harness runs them).
func InformerIndexer(ctx context.Context, c ctrlcache.Cache, obj client.Object, ix toolscache.Indexers) (toolscache.Indexer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("informer for %T: %w", obj, err)
	}
	withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("informer for %T exposes no indexer", obj)
	}
	indexer := withIndexer.GetIndexer()
	have, missing := indexer.GetIndexers(), toolscache.Indexers{}
	for name, fn := range ix {
		if _, ok := have[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) > 0 {
		if err := inf.AddIndexers(missing); err != nil {
			return nil, fmt.Errorf("indexers for %T: %w", obj, err)
		}
	}
	return indexer, nil
}

// TokensByKeyHash returns the ApiTokens whose key has this SHA-256 (hex).
func (l *Lookup) TokensByKeyHash(hash string) []*v1.ApiToken {
	return byIndex[*v1.ApiToken](l.tokens, lookupKeyHash, hash)
}

// TenantsInNamespace returns the Tenants of a namespace.
func (l *Lookup) TenantsInNamespace(ns string) []*v1.Tenant {
	return byIndex[*v1.Tenant](l.tenants, lookupNamespace, ns)
}

// TenantsByUserID returns the Tenants with this ledger user ID.
func (l *Lookup) TenantsByUserID(id int64) []*v1.Tenant {
	return byIndex[*v1.Tenant](l.tenants, lookupUserID, strconv.FormatInt(id, 10))
}

func byIndex[T any](ix toolscache.Indexer, name, value string) []T {
	items, err := ix.ByIndex(name, value)
	if err != nil || len(items) == 0 {
		return nil
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		if t, ok := it.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
