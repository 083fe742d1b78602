// Package wire assembles the gateway from a controller-runtime manager (its
// informer cache and client) and a ledger: authenticator, handlers, server.
// main and the test suites build the gateway the same way through it.
package wire

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/handlers"
	"github.com/modelgate/modelgate/gateway/server"
	"github.com/modelgate/modelgate/gateway/store"
)

// Options configure the gateway.
type Options struct {
	Listen        string
	ShutdownGrace time.Duration
	Clock         clock.PassiveClock
}

// Gateway builds the gateway server and adds it to the manager, which runs
// it on every replica (it needs no leader). The server is ready when the
// informer caches have synced and the ledger answers.
func Gateway(mgr ctrl.Manager, ledger *store.Store, o Options) (*server.Server, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	authn := &auth.Authenticator{Reader: mgr.GetCache(), Clock: o.Clock, ResolveTokenID: resolveTokenID(ledger)}
	srv := server.New(server.Options{
		Addr:          o.Listen,
		ShutdownGrace: o.ShutdownGrace,
		ReadyChecks: map[string]server.ReadyCheck{
			"informer caches": func(ctx context.Context) error {
				if !mgr.GetCache().WaitForCacheSync(ctx) {
					return errors.New("not synced yet")
				}
				return nil
			},
			"ledger": ledger.Ping,
		},
	})
	handlers.Register(srv, &handlers.Deps{
		Cache: mgr.GetCache(), Writer: mgr.GetClient(), Ledger: ledger, Auth: authn, Clock: o.Clock,
	})
	if err := mgr.Add(runnable{srv}); err != nil {
		return nil, err
	}
	return srv, nil
}

// resolveTokenID registers (idempotently, by UID) a token whose status has no
// ID yet; the controller's own registration returns the same ID.
func resolveTokenID(ledger *store.Store) auth.TokenIDResolver {
	return func(ctx context.Context, tok *v1.ApiToken, userID int64) (int64, error) {
		var quota billing.Quota
		if tok.Spec.Quota != nil {
			quota = billing.Quota(*tok.Spec.Quota)
		}
		return ledger.EnsureToken(ctx, store.TokenSpec{
			UID: string(tok.UID), UserID: userID, Name: tok.Spec.DisplayName, RemainQuota: quota,
			TokenLimits: store.TokenLimits{
				Unlimited:    tok.Spec.UnlimitedQuota,
				DailyLimit:   billing.Quota(tok.Spec.DailyQuota),
				MonthlyLimit: billing.Quota(tok.Spec.MonthlyQuota),
			},
		})
	}
}

// runnable runs the server on every replica, leader or not.
type runnable struct{ srv *server.Server }

func (r runnable) Start(ctx context.Context) error { return r.srv.Run(ctx) }
func (runnable) NeedLeaderElection() bool          { return false }

var _ manager.LeaderElectionRunnable = runnable{}
