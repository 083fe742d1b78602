package routing

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// TestRouteIndexPrefersTheTenantsRoute: Route through the informer index
// answers as the cache List does: the tenant's own route wins over the
// platform's, other tenants get the platform's, an unknown model none.
func TestRouteIndexPrefersTheTenantsRoute(t *testing.T) {
	ix := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{indexModel: func(obj any) ([]string, error) {
		return []string{string(obj.(*v1.ModelRoute).Spec.Model)}, nil
	}})
	add := func(ns, name, model string) {
		if err := ix.Add(&v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ModelRouteSpec{Model: v1.ModelID(model)}}); err != nil {
			t.Fatal(err)
		}
	}
	add("system", "m", "m")
	add("acme", "private-m", "m")
	add("other", "n", "n") // another tenant's private model
	r := &Router{SystemNamespace: "system", Index: &RouteIndex{ix: ix}}
	for _, c := range []struct{ tenant, model, want string }{
		{"acme", "m", "acme/private-m"},
		{"globex", "m", "system/m"},
		{"acme", "n", ""},
		{"other", "n", "other/n"},
		{"acme", "x", ""},
	} {
		rt, err := r.Route(context.Background(), c.tenant, c.model)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if rt != nil {
			got = rt.Namespace + "/" + rt.Name
		}
		if got != c.want {
			t.Errorf("tenant %s, model %s: got %q, want %q", c.tenant, c.model, got, c.want)
		}
	}
}
