// Package credential resolves a route backend into an upstream.Backend with its credential, one way for the gateway's text calls and the GenerationTask controller.
package credential

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Source reads one key of a Secret of a namespace. An error wraps ErrNoSecret
// or ErrNoKey when the Secret or its key is missing; any other error is the
// API server's (worth retrying).
type Source func(ctx context.Context, namespace, name, key string) (string, error)

// The missing-credential errors of a Source.
var (
	ErrNoSecret = errors.New("credential Secret not found")
	ErrNoKey    = errors.New("credential Secret has no such key")
)

// FromData reads key from a Secret's data: the value with surrounding
// white space removed (a Secret written from a file often ends in a
// newline, which no upstream accepts in a header). Empty is ErrNoKey.
func FromData(data map[string][]byte, namespace, name, key string) (string, error) {
	v := strings.TrimSpace(string(data[key]))
	if v == "" {
		return "", fmt.Errorf("credential secret %s/%s has no key %q: %w", namespace, name, key, ErrNoKey)
	}
	return v, nil
}

// FromReader reads credentials through c (the manager's cached client).
func FromReader(c client.Reader) Source {
	return func(ctx context.Context, namespace, name, key string) (string, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				err = errors.Join(ErrNoSecret, err)
			}
			return "", fmt.Errorf("credential secret %s/%s: %w", namespace, name, err)
		}
		return FromData(s.Data, namespace, name, key)
	}
}

// Resolve turns backend b of a route in namespace into an upstream.Backend,
// its credential read from the Secret credentialSecretRef names (none: no
// credential). A missing Secret or key is an *upstream.Error of class
// Failover (this backend cannot serve; another may) with a message safe to
// show; any other error is src's, as is.
func Resolve(ctx context.Context, src Source, namespace string, b *v1.Backend) (upstream.Backend, error) {
	out := upstream.Backend{Name: b.Name, Provider: b.Provider, BaseURL: b.BaseURL, UpstreamModel: b.UpstreamModel,
		Options: b.Options, Timeout: time.Duration(b.TimeoutSeconds) * time.Second}
	ref := b.CredentialSecretRef
	if ref == nil {
		return out, nil
	}
	key, err := src(ctx, namespace, ref.Name, ref.Key)
	switch {
	case errors.Is(err, ErrNoSecret):
		return out, &upstream.Error{Class: upstream.Failover, Err: err,
			Message: fmt.Sprintf("the credential Secret %s/%s of backend %q does not exist", namespace, ref.Name, b.Name)}
	case errors.Is(err, ErrNoKey):
		return out, &upstream.Error{Class: upstream.Failover, Err: err,
			Message: fmt.Sprintf("the credential Secret %s/%s of backend %q has no key %q", namespace, ref.Name, b.Name, ref.Key)}
	case err != nil:
		return out, err
	}
	out.APIKey = key
	out.SecretKey = func(ctx context.Context, key string) (string, error) { return src(ctx, namespace, ref.Name, key) }
	return out, nil
}
