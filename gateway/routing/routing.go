// Package routing chooses upstream backends for a request: the ModelRoute
// visible to the tenant (its own namespace wins over the platform's), then
// the key's groups in order, the lowest priority tier first, weighted random
// inside a tier, skipping backends that are not ready or are cooling down.
package routing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
)

// Candidate is one backend to try, in the group it serves the request for.
type Candidate struct {
	Route   *v1.ModelRoute
	Backend *v1.Backend
	Group   string
}

// Key identifies the backend for the circuit breaker.
func (c Candidate) Key() string {
	return c.Route.Namespace + "/" + c.Route.Name + "/" + c.Backend.Name
}

// Router finds routes in the informer cache and orders candidates.
type Router struct {
	Cache           client.Reader
	SystemNamespace string
	// Index, when set, serves Route from the informer's indexer instead of
	// a cache List (the hot path; see NewRouteIndex).
	Index   *RouteIndex
	Breaker *Breaker
	// Float returns a number in [0,1); tests make it deterministic.
	Float func() float64
}

// Route returns the ModelRoute serving model for a tenant: one in the tenant's
// namespace wins over the platform's. nil means the model is not offered.
func (r *Router) Route(ctx context.Context, tenantNamespace, model string) (*v1.ModelRoute, error) {
	if r.Index != nil {
		return r.Index.route(tenantNamespace, r.SystemNamespace, model)
	}
	list := &v1.ModelRouteList{}
	// The routes are the cache's own objects (no copy on the hot path):
	// nothing below modifies them.
	if err := r.Cache.List(ctx, list, client.MatchingFields{index.RouteModel: model}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list routes of %s: %w", model, err)
	}
	var platform *v1.ModelRoute
	for i := range list.Items {
		rt := &list.Items[i]
		switch rt.Namespace {
		case tenantNamespace:
			return rt, nil
		case r.SystemNamespace:
			platform = rt
		}
	}
	return platform, nil
}

// Visible lists every route a tenant can see, the tenant's own replacing the
// platform's for the same model, sorted by model.
func (r *Router) Visible(ctx context.Context, tenantNamespace string) ([]*v1.ModelRoute, error) {
	byModel := map[v1.ModelID]*v1.ModelRoute{}
	for _, ns := range []string{r.SystemNamespace, tenantNamespace} { // tenant last: it wins
		list := &v1.ModelRouteList{}
		if err := r.Cache.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list routes in %s: %w", ns, err)
		}
		for i := range list.Items {
			byModel[list.Items[i].Spec.Model] = &list.Items[i]
		}
	}
	out := make([]*v1.ModelRoute, 0, len(byModel))
	for _, rt := range byModel {
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Model < out[j].Spec.Model })
	return out, nil
}

// ReadyBackend reports whether the controller found the backend usable.
func ReadyBackend(route *v1.ModelRoute, b *v1.Backend) bool {
	if b.Disabled {
		return false
	}
	for _, s := range route.Status.Backends {
		if s.Name == b.Name {
			return s.Ready
		}
	}
	return false
}

// ServesGroup reports whether the route has a ready backend for the group.
func ServesGroup(route *v1.ModelRoute, group string) bool {
	for i := range route.Spec.Backends {
		b := &route.Spec.Backends[i]
		if ReadyBackend(route, b) && slices.Contains(backendGroups(b), group) {
			return true
		}
	}
	return false
}

func backendGroups(b *v1.Backend) []string {
	if len(b.Groups) == 0 {
		return []string{v1.DefaultGroup}
	}
	out := make([]string, len(b.Groups))
	for i, g := range b.Groups {
		out[i] = string(g)
	}
	return out
}

// Plan orders the candidates for a request: groups in the order given, and
// in each group the ready backends by priority tier (lowest first), weighted
// random inside a tier. Backends whose breaker is open go last, so a request
// still has somewhere to go when every backend is cooling down.
func (r *Router) Plan(route *v1.ModelRoute, groups []string) []Candidate {
	var healthy, cooling []Candidate
	seen := map[string]bool{}
	for _, g := range groups {
		tiers := map[int32][]*v1.Backend{}
		for i := range route.Spec.Backends {
			b := &route.Spec.Backends[i]
			if !seen[b.Name] && ReadyBackend(route, b) && slices.Contains(backendGroups(b), g) {
				tiers[b.Priority] = append(tiers[b.Priority], b)
			}
		}
		prios := make([]int32, 0, len(tiers))
		for p := range tiers {
			prios = append(prios, p)
		}
		slices.Sort(prios)
		for _, p := range prios {
			for _, b := range r.shuffle(tiers[p]) {
				seen[b.Name] = true
				c := Candidate{Route: route, Backend: b, Group: g}
				if r.Breaker != nil && !r.Breaker.Allow(c.Key()) {
					cooling = append(cooling, c)
				} else {
					healthy = append(healthy, c)
				}
			}
		}
	}
	return append(healthy, cooling...)
}

// shuffle orders a tier by weighted random sampling without replacement;
// weight-0 backends come after all weighted ones.
func (r *Router) shuffle(tier []*v1.Backend) []*v1.Backend {
	float := r.Float
	if float == nil {
		float = rand.Float64
	}
	pool := slices.Clone(tier)
	out := make([]*v1.Backend, 0, len(pool))
	for len(pool) > 0 {
		var total int64
		for _, b := range pool {
			total += int64(b.Weight)
		}
		if total == 0 {
			return append(out, pool...)
		}
		x := float() * float64(total)
		pick := len(pool) - 1
		var acc int64
		for i, b := range pool {
			acc += int64(b.Weight)
			if x < float64(acc) {
				pick = i
				break
			}
		}
		out = append(out, pool[pick])
		pool = slices.Delete(pool, pick, pick+1)
	}
	return out
}
