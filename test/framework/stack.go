package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/http/server"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/usagelog"
	"github.com/modelgate/modelgate/gateway/wire"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// SystemNamespace is the stack's namespace of platform routes and prices.
const SystemNamespace = "modelgate-system"

// Stack is the whole system in one test process: a real control plane, a
// real ledger, the controllers and the gateway on a loopback port.
type Stack struct {
	*Env
	Ledger *store.Store
	// Egress is the system's outbound HTTP (its upstream transport).
	Egress upstream.Egress
	// Upstreams are the system's adapters (a test reaches one's test hooks).
	Upstreams *upstream.Registry
	// Cache is the manager's informer cache.
	Cache cache.Cache
	// DSN is the ledger's DSN.
	DSN     string
	BaseURL string
	// MoreURLs are the base URLs of StackOptions.MoreGateways, in order.
	MoreURLs []string
	// Blobs is the blob store the controllers and the gateway share.
	Blobs  *blob.Store
	cancel context.CancelFunc
	done   chan error
}

// StackOptions configure StartStack.
type StackOptions struct {
	// SyncPeriod of the controllers' ledger mirror; 0 means 1 s (tests watch
	// mirrored figures move; a benchmark with many tokens wants more).
	SyncPeriod time.Duration
	// ManagerQPS lifts the manager's client rate limit (0: client-go's default).
	ManagerQPS float32
	// DSN of the ledger; empty means a SQLite file in dir.
	DSN string
	// Dir holds the SQLite file when DSN is empty.
	Dir string
	// WrapUsageSink wraps the gateway's usage writer as the handlers see it
	// (see wire.Options); nil: unwrapped.
	WrapUsageSink func(handlers.UsageSink) handlers.UsageSink
	// UsageDurability of the gateway's usage writer (default: disk).
	UsageDurability usagelog.Durability
	// MoreGateways adds gateway replicas to the same manager and ledger,
	// each with its own listener, replica ID, spool and quota leases, as
	// another pod of the Deployment would be; the load harness compares
	// usage durabilities side by side this way.
	MoreGateways []GatewayOptions
	// ConsoleOIDC configures the console's OpenID Connect sign-in
	// (OIDCProvider.ConsoleConfig); zero: access-token sign-in only.
	ConsoleOIDC console.OIDC
	// NoBatchController runs no Batch controller: for specs that write a
	// Batch's status by hand, as the controller would.
	NoBatchController bool
}

// GatewayOptions configure one of StackOptions.MoreGateways.
type GatewayOptions struct {
	// ReplicaID names the replica's leases and spool (required, unique).
	ReplicaID       string
	UsageDurability usagelog.Durability
}

// StartStack starts the control plane, opens the ledger and runs the
// controllers and the gateway until Stop.
func StartStack(o StackOptions) (*Stack, error) {
	env, err := Start()
	if err != nil {
		return nil, err
	}
	s := &Stack{Env: env, done: make(chan error, 1)}
	if err := s.start(o); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(o StackOptions) error {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if err := s.Client.Create(ctx, ns); err != nil {
		return err
	}
	s.DSN = o.DSN
	if s.DSN == "" {
		s.DSN = "sqlite://" + filepath.Join(o.Dir, "ledger.db")
	}
	var err error
	if s.Ledger, err = store.Open(ctx, s.DSN); err != nil {
		return err
	}
	// The same composition as the binaries: one manager running the
	// controllers and the gateway, which share one blob store.
	gwOpts := wire.Options{Listen: "127.0.0.1:0", ShutdownGrace: 5 * time.Second,
		DataDir: o.Dir, BlobSigningKey: []byte("stack-blob-signing-key"),
		WrapUsageSink: o.WrapUsageSink, UsageDurability: o.UsageDurability,
		// A loaded test machine can take longer than the default for the
		// controller's first submission; the wait ends at its outcome, so a
		// longer bound only makes a synchronous refusal's 422 deterministic.
		SubmitWait: 15 * time.Second, ConsoleOIDC: o.ConsoleOIDC}
	if gwOpts.DataDir == "" {
		gwOpts.DataDir = os.TempDir()
	}
	sync := o.SyncPeriod
	if sync <= 0 {
		sync = time.Second // tests watch mirrored figures move
	}
	sys, err := wire.NewSystem(ctx, wire.SystemOptions{
		Config: s.Config, Ledger: s.Ledger, SystemNamespace: SystemNamespace, QPS: o.ManagerQPS,
		// Upstream batch jobs are polled often: the fakes end them in moments.
		Controllers: &controllers.Options{SyncPeriod: sync, NoBatchController: o.NoBatchController, BatchPollInterval: 100 * time.Millisecond},
		Gateway:     &gwOpts, Guard: s.Guard, UpstreamResponseHeaderTimeout: upstream.DefaultResponseHeaderTimeout,
		// The TLS fakes serve httptest's certificate: trusted here, never by
		// skipping verification.
		UpstreamRootCAs: fakeupstream.RootCAs(),
	})
	if err != nil {
		return err
	}
	s.Cache, s.Blobs, s.Egress, s.Upstreams = sys.Manager.GetCache(), sys.Blobs, sys.Egress, sys.Upstreams
	s.Served = s.Cache
	more, err := addGateways(sys, gwOpts, o.MoreGateways)
	if err != nil {
		return err
	}
	go func() { s.done <- sys.Start(ctx) }()
	if s.BaseURL, err = waitServing(ctx, sys.Gateway); err != nil {
		return err
	}
	for _, gw := range more {
		url, err := waitServing(ctx, gw)
		if err != nil {
			return err
		}
		s.MoreURLs = append(s.MoreURLs, url)
	}
	return nil
}

// addGateways adds a gateway replica per entry of more to the system,
// configured as base but for its replica ID, durability and data
// directory (base's, plus the replica ID).
func addGateways(sys *wire.System, base wire.Options, more []GatewayOptions) ([]*server.Server, error) {
	var out []*server.Server
	for _, g := range more {
		o := base
		o.ReplicaID, o.UsageDurability = g.ReplicaID, g.UsageDurability
		o.DataDir = filepath.Join(base.DataDir, g.ReplicaID)
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return nil, err
		}
		gw, err := sys.AddGateway(o)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: %w", g.ReplicaID, err)
		}
		out = append(out, gw)
	}
	return out, nil
}

// waitServing waits until gw listens and answers /readyz, and returns its
// base URL.
func waitServing(ctx context.Context, gw *server.Server) (string, error) {
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		return gw.Addr() != "", nil
	}); err != nil {
		return "", fmt.Errorf("gateway did not start: %w", err)
	}
	base := "http://" + gw.Addr()
	return base, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Stop stops the gateway and controllers, closes the ledger and stops the
// control plane.
func (s *Stack) Stop() error {
	if s.cancel != nil {
		s.cancel()
		select {
		case err := <-s.done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "framework: the system stopped with an error: %v\n", err)
			}
		case <-time.After(Timeout):
		}
	}
	if s.Ledger != nil {
		_ = s.Ledger.Close()
	}
	return s.Env.Stop()
}

// Account is a tenant with a ready key, made for one test.
type Account struct {
	Namespace string
	Tenant    *v1.Tenant
	Token     *v1.ApiToken
	Key       string
}

// NewAccount creates a namespace, a Tenant with the given grants and spec
// tweaks, and an ApiToken, and waits until both are ready (the controllers
// that make them ready may run in this process or in another).
func (e *Env) NewAccount(ctx context.Context, tenant v1.TenantSpec, token v1.ApiTokenSpec) (*Account, error) {
	ns := NewNamespace("acct")
	if err := e.Client.Create(ctx, ns); err != nil {
		return nil, err
	}
	return e.NewAccountIn(ctx, ns.Name, tenant, token)
}

// NewAccountIn is NewAccount in an existing namespace, which must not hold a
// Tenant yet (one Tenant per namespace).
func (e *Env) NewAccountIn(ctx context.Context, namespace string, tenant v1.TenantSpec, token v1.ApiTokenSpec) (*Account, error) {
	a := &Account{Namespace: namespace}
	a.Tenant = &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: namespace}, Spec: tenant}
	if err := e.Client.Create(ctx, a.Tenant); err != nil {
		return nil, err
	}
	if token.DisplayName == "" {
		token.DisplayName = "test key"
	}
	a.Token = &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: namespace}, Spec: token}
	if err := e.Client.Create(ctx, a.Token); err != nil {
		return nil, err
	}
	if err := e.WaitReady(ctx, a.Tenant); err != nil {
		return nil, err
	}
	if err := e.WaitReady(ctx, a.Token); err != nil {
		return nil, err
	}
	if e.Served != nil {
		for _, obj := range []client.Object{a.Tenant, a.Token} {
			if err := waitCondition(ctx, e.Served, obj.DeepCopyObject().(client.Object)); err != nil {
				return nil, fmt.Errorf("wait for the gateway's cache to hold %s: %w", obj.GetName(), err)
			}
		}
	}
	secret := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: a.Token.Status.SecretName}, secret); err != nil {
		return nil, err
	}
	a.Key = string(secret.Data[v1.APIKeySecretKey])
	return a, nil
}

// WaitReady waits for obj's Ready condition and reloads it.
func (e *Env) WaitReady(ctx context.Context, obj client.Object) error {
	return waitCondition(ctx, e.Client, obj)
}

// WaitCached waits until the stack's own informer cache, which the gateway
// serves from, holds obj (a ModelRoute, PriceRule, Tenant or ApiToken) with
// its Ready condition true (Published for a PriceRule). The API server says
// so a watch event earlier: a request sent in between can find no route or
// no price.
func (s *Stack) WaitCached(ctx context.Context, obj client.Object) error {
	return waitCondition(ctx, s.Cache, obj.DeepCopyObject().(client.Object))
}

// waitCondition polls obj through r until its Ready condition is true
// (Published for a PriceRule).
func waitCondition(ctx context.Context, r client.Reader, obj client.Object) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var conds []metav1.Condition
		cond := v1.ConditionReady
		switch o := obj.(type) {
		case *v1.Tenant:
			conds = o.Status.Conditions
		case *v1.ApiToken:
			conds = o.Status.Conditions
		case *v1.ModelRoute:
			conds = o.Status.Conditions
		case *v1.PriceRule:
			conds, cond = o.Status.Conditions, v1.ConditionPublished
		default:
			return false, fmt.Errorf("wait for %s: unsupported %T", cond, obj)
		}
		return meta.IsStatusConditionTrue(conds, cond), nil
	})
}
