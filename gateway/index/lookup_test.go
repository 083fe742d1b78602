package index

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// informers is a cache that hands out one real, unstarted informer per
// kind: what InformerIndexer reads of a cache.
type informers struct {
	ctrlcache.Cache
	byKind map[string]toolscache.SharedIndexInformer
}

func (c *informers) GetInformer(_ context.Context, obj client.Object, _ ...ctrlcache.InformerGetOption) (ctrlcache.Informer, error) {
	name := ""
	switch obj.(type) {
	case *v1.ApiToken:
		name = "ApiToken"
	case *v1.Tenant:
		name = "Tenant"
	}
	if inf, ok := c.byKind[name]; ok {
		return inf, nil
	}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, obj, 0, toolscache.Indexers{})
	c.byKind[name] = inf
	return inf, nil
}

// Two gateways built on one cache (replicas in one process) share its
// indexes: the second registration neither fails nor replaces them.
func TestLookupTwiceOnOneCache(t *testing.T) {
	g := NewWithT(t)
	c := &informers{byKind: map[string]toolscache.SharedIndexInformer{}}
	first, err := NewLookup(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := NewLookup(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred(), "the indexes the first lookup registered are reused")

	tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns"},
		Status: v1.ApiTokenStatus{KeyHash: "abc"}}
	g.Expect(c.byKind["ApiToken"].GetIndexer().Add(tok)).To(Succeed())
	for _, l := range []*Lookup{first, second} {
		g.Expect(l.TokensByKeyHash("abc")).To(ConsistOf(tok))
	}

	_, err = InformerIndexer(context.Background(), c, &v1.Tenant{}, toolscache.Indexers{
		"other": func(any) ([]string, error) { return nil, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.byKind["Tenant"].GetIndexer().GetIndexers()).To(HaveKey("other"), "a new index is still added")
}
