package wire

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

// secretData mirrors the Data of the cached Secrets by namespace/name, from
// the Secret informer's events, so that reading an upstream credential on
// the hot path is a map read: a cache Get deep-copies the whole Secret on
// every request. (It cannot read the informer's store directly, as
// index.InformerIndexer does for other kinds: the gateway caches Secrets of
// the system namespace only, and such a namespace-restricted informer
// exposes no indexer.) The maps are the informer's own objects' (never
// modified).
type secretData struct {
	mu sync.RWMutex
	m  map[string]map[string][]byte
}

func watchSecrets(ctx context.Context, c cache.Cache) (*secretData, error) {
	inf, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, fmt.Errorf("secret informer: %w", err)
	}
	d := &secretData{m: map[string]map[string][]byte{}}
	set := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			d.mu.Lock()
			d.m[s.Namespace+"/"+s.Name] = s.Data
			d.mu.Unlock()
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok {
				d.mu.Lock()
				delete(d.m, s.Namespace+"/"+s.Name)
				d.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("secret informer: %w", err)
	}
	return d, nil
}

func (d *secretData) get(ns, name string) (map[string][]byte, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	data, ok := d.m[ns+"/"+name]
	return data, ok
}

// credentials reads an upstream credential from a Secret of the route's
// namespace: from the mirror, or through the client (a Secret the informer
// has not delivered yet). The value goes only into the upstream request.
func credentials(secrets *secretData, c client.Reader) credential.Source {
	direct := credential.FromReader(c)
	return func(ctx context.Context, ns, name, key string) (string, error) {
		if data, ok := secrets.get(ns, name); ok {
			return credential.FromData(data, ns, name, key)
		}
		return direct(ctx, ns, name, key)
	}
}
