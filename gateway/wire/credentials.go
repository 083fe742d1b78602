package wire

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// credentials reads an upstream credential from a Secret of the route's
// namespace: from the Secret informer's own store (a map read of the
// cache's object; a cache Get would deep-copy the whole Secret on every
// request), or through the client for a Secret the informer has not
// delivered yet. The value goes only into the upstream request.
func credentials(secrets toolscache.Indexer, c client.Reader) func(ctx context.Context, ns, name, key string) (string, error) {
	return func(ctx context.Context, ns, name, key string) (string, error) {
		var data map[string][]byte
		if obj, ok, _ := secrets.GetByKey(ns + "/" + name); ok {
			if s, ok := obj.(*corev1.Secret); ok {
				data = s.Data // the cache's object: read only
			}
		}
		if data == nil {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return "", fmt.Errorf("credential secret %s/%s: %w", ns, name, err)
			}
			data = s.Data
		}
		v := data[key]
		if len(v) == 0 {
			return "", fmt.Errorf("credential secret %s/%s has no key %q", ns, name, key)
		}
		return string(v), nil
	}
}
