package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
)

// builderIndexer registers the shared cache indexes on a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (x builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	x.b.WithIndex(obj, field, fn)
	return nil
}

func fakeClient(t *testing.T, objs ...runtime.Object) client.Client {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(kubescheme.New()).WithRuntimeObjects(objs...)
	if err := index.AddIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

func names(reqs []reconcile.Request) map[string]bool {
	out := map[string]bool{}
	for _, r := range reqs {
		out[r.Namespace+"/"+r.Name] = true
	}
	return out
}

// A Secret event wakes exactly the routes and tokens that name it: not every
// route of its namespace, and (for tokens) not only Secrets they own.
func TestSecretEventsReachOnlyTheirReferrers(t *testing.T) {
	route := func(ns, name string, secrets ...string) *v1.ModelRoute {
		rt := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ModelRouteSpec{Model: v1.ModelID(name)}}
		for i, s := range secrets {
			rt.Spec.Backends = append(rt.Spec.Backends, v1.Backend{Name: "b" + string(rune('a'+i)), Provider: "openai",
				CredentialSecretRef: &v1.SecretKeyRef{Name: s, Key: "apiKey"}})
		}
		rt.Spec.Backends = append(rt.Spec.Backends, v1.Backend{Name: "sim", Provider: "simulated"})
		return rt
	}
	token := func(ns, name, secret string) *v1.ApiToken {
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if secret != "" {
			tok.Spec.KeySecretRef = &v1.SecretKeyRef{Name: secret, Key: "key"}
		}
		return tok
	}
	c := fakeClient(t,
		route("a", "uses-upstream", "upstream", "other"), route("a", "uses-other", "other"), route("a", "no-secret"),
		route("b", "uses-upstream", "upstream"),
		token("a", "by-ref", "upstream"), token("a", "generated", ""), token("b", "by-ref", "upstream"),
	)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "upstream"}}
	ctx := context.Background()

	routes := names((&ModelRouteReconciler{Client: c}).routesReferencing(ctx, secret))
	if want := map[string]bool{"a/uses-upstream": true}; len(routes) != 1 || !routes["a/uses-upstream"] {
		t.Errorf("routes woken by a/upstream = %v, want %v", routes, want)
	}
	tokens := names((&ApiTokenReconciler{Client: c}).tokensReferencing(ctx, secret))
	if len(tokens) != 1 || !tokens["a/by-ref"] {
		t.Errorf("tokens woken by a/upstream = %v, want only a/by-ref", tokens)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other"}}
	if got := names((&ModelRouteReconciler{Client: c}).routesReferencing(ctx, other)); len(got) != 2 {
		t.Errorf("routes woken by a/other = %v, want uses-upstream and uses-other", got)
	}
}
