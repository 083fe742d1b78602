package tokenspec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/store"
)

// Registry registers a key in the ledger; *store.Store implements it.
type Registry interface {
	EnsureToken(ctx context.Context, spec store.TokenSpec) (int64, error)
}

// Create writes a new ApiToken (NewApiToken's) and registers it in the
// ledger at once, with For's registration, so that the key works as soon as
// the caller hands it out; the controller then provisions it as any other.
// A failed registration deletes the object again: no orphan. It returns the
// ledger's token ID.
func Create(ctx context.Context, w client.Writer, reg Registry, tok *v1.ApiToken, userID int64) (int64, error) {
	if err := w.Create(ctx, tok); err != nil {
		return 0, fmt.Errorf("create ApiToken: %w", err)
	}
	spec, err := For(tok, userID)
	var id int64
	if err == nil {
		id, err = reg.EnsureToken(ctx, spec)
	}
	if err != nil {
		if derr := w.Delete(ctx, tok); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete the unregistered ApiToken: %w", derr))
		}
		return 0, fmt.Errorf("register token: %w", err)
	}
	return id, nil
}

// AwaitCached waits (briefly, at most two seconds) until this replica's
// informer cache holds a new key (knows: auth.Authenticator.KnowsKey), so a
// client using the key right after it is shown is not refused by a cache a
// few milliseconds behind. Other replicas catch up within the watch
// latency. A nil knows does not wait.
func AwaitCached(ctx context.Context, knows func(keyHash string) bool, keyHash string) {
	if knows == nil {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for !knows(keyHash) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}
