package wire

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/http/server"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
)

// SystemOptions configure the whole system: the controllers, the gateway or
// both, on one manager (one informer cache, one set of indexes). The
// manager, gateway and dev commands and the test framework all build
// modelgate through NewSystem.
type SystemOptions struct {
	// Config reaches the API server.
	Config *rest.Config
	// Ledger is the open ledger both halves use.
	Ledger *store.Store
	// SystemNamespace holds platform routes, prices and the manager's lease.
	SystemNamespace string
	// MetricsAddr and ProbeAddr are the manager's metrics and health
	// endpoints; "0" (or empty) turns one off.
	MetricsAddr, ProbeAddr string
	// PprofAddr serves net/http/pprof when set (off by default): for an
	// operator on a private port, never on the API listener.
	PprofAddr string
	// LeaderElection elects one active controller set among manager
	// replicas. The gateway runs on every replica either way.
	LeaderElection bool
	// QPS lifts the client-side rate limit of the manager's client (0:
	// client-go's default); a load test with many objects wants more.
	QPS float32
	// Controllers, when set, runs the reconcilers with these options; the
	// ledger, the known-provider check and the blob store are filled in.
	Controllers *controllers.Options
	// Gateway, when set, serves the HTTP API with these options. Its Blobs
	// (an open store), or else its Blob* and PublicURL fields, choose the
	// process's blob store.
	Gateway *Options
	// ManagerBlobs holds the blob settings (Blobs or Blob*, PublicURL) of
	// a process without a gateway: the GenerationTask controller writes generated
	// media to the store the gateways serve.
	ManagerBlobs Options
	// Guard decides which addresses tenant- and client-chosen URLs
	// (webhooks, reference images, asset and output downloads) may reach
	// (--allow-private-networks); nil: public addresses only.
	Guard *netguard.Guard
	// UpstreamResponseHeaderTimeout bounds the wait for an upstream's
	// response headers (--upstream-response-header-timeout); zero or less:
	// no bound.
	UpstreamResponseHeaderTimeout time.Duration
	// UpstreamRootCAs, when set, are the roots upstream certificates are
	// verified against instead of the system's (--upstream-ca-file: the
	// system's plus a private CA; tests: their fakes' CA).
	UpstreamRootCAs *x509.CertPool
	// SkipControllerNameValidation lets one process build more than one
	// system with controllers (tests that restart the manager in process).
	SkipControllerNameValidation bool
}

// System is modelgate assembled on one controller-runtime manager.
type System struct {
	Manager ctrl.Manager
	// Gateway is the HTTP server; nil without SystemOptions.Gateway.
	Gateway *server.Server
	// Blobs is the blob store the controllers write generated media to and
	// the gateway serves and signs; nil without one configured.
	Blobs *blob.Store
	// Egress is the process's outbound HTTP: every adapter and download
	// of both halves goes through it.
	Egress upstream.Egress
	// Upstreams are the adapters, built once on Egress and shared by the
	// controllers and every gateway of the system.
	Upstreams *upstream.Registry
	guard     *netguard.Guard
	// lines runs the Batch controller's lines on the first gateway's text
	// pipeline, or on the manager's own without a gateway.
	lines *batchLines

	ledger    *store.Store
	namespace string
}

// NewSystem builds the manager with modelgate's scheme and cache indexes,
// opens the one blob store, and registers the controllers and the gateway
// that the options ask for. Start runs them.
func NewSystem(ctx context.Context, o SystemOptions) (*System, error) {
	if o.SystemNamespace == "" {
		o.SystemNamespace = "modelgate-system"
	}
	cfg := o.Config
	if o.QPS > 0 {
		cfg = rest.CopyConfig(o.Config)
		cfg.QPS, cfg.Burst = o.QPS, int(2*o.QPS)
	}
	mopts := ctrl.Options{
		Scheme:                 kubescheme.New(),
		Metrics:                metricsserver.Options{BindAddress: orOff(o.MetricsAddr)},
		HealthProbeBindAddress: orOff(o.ProbeAddr),
		// Served with the probes, before and without leader election.
		PprofBindAddress:        orOff(o.PprofAddr),
		LeaderElection:          o.LeaderElection && o.Controllers != nil,
		LeaderElectionID:        "modelgate-manager.modelgate.io",
		LeaderElectionNamespace: o.SystemNamespace,
	}
	if o.SkipControllerNameValidation {
		skip := true
		mopts.Controller.SkipNameValidation = &skip
	}
	if o.Controllers == nil {
		// A gateway may read Secrets only in the system namespace (upstream
		// credentials); a cluster-wide Secret informer would never sync.
		mopts.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.SystemNamespace: {}}},
		}}
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	if err := index.AddIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	s := &System{Manager: mgr, ledger: o.Ledger, namespace: o.SystemNamespace, guard: o.Guard,
		lines: &batchLines{cache: mgr.GetClient()}}
	// Each upstream attempt carries its trace context (telemetry.Transport):
	// off, the wrapper costs one atomic load per request.
	s.Egress = upstream.NewEgress(upstream.EgressOptions{ResponseHeaderTimeout: o.UpstreamResponseHeaderTimeout,
		Guard: o.Guard, WrapAPI: telemetry.Transport, RootCAs: o.UpstreamRootCAs})
	s.Upstreams = builtin.Registry(s.Egress)
	if err := s.openBlobs(o); err != nil {
		return nil, err
	}
	if o.Controllers != nil {
		copts := *o.Controllers
		copts.Ledger, copts.KnownProvider, copts.Blobs, copts.Upstreams = o.Ledger, builtin.Known, s.Blobs, s.Upstreams
		copts.Guard, copts.Downloads = o.Guard, s.Egress.Downloads
		copts.BatchLines, copts.BatchFiles = s.lines, batchFilesOf(o.Ledger, s.Blobs)
		copts.BatchUpstream = &batchUpstream{lines: s.lines, ledger: o.Ledger}
		if err := controllers.Setup(mgr, copts); err != nil {
			return nil, err
		}
		metrics.RegisterTaskPhases(mgr.GetCache())
	}
	if o.Gateway != nil {
		if s.Gateway, err = s.AddGateway(*o.Gateway); err != nil {
			return nil, err
		}
	} else if o.Controllers != nil {
		if err := s.addBatchPipeline(o); err != nil {
			return nil, err
		}
	}
	if err := s.addHealthChecks(ctx, o.Ledger); err != nil {
		return nil, err
	}
	return s, nil
}

// openBlobs opens the one blob store of the process, which the gateway's
// options choose (ManagerBlobs without a gateway). Local links are signed
// with the public URL, else the gateway's own address.
func (s *System) openBlobs(o SystemOptions) error {
	bo := o.ManagerBlobs
	if o.Gateway != nil {
		bo = *o.Gateway
	}
	if bo.Blobs != nil { // opened by the caller
		s.Blobs = bo.Blobs
		return nil
	}
	var err error
	s.Blobs, err = OpenBlobs(bo, func() string {
		if s.Gateway == nil {
			return bo.PublicURL
		}
		return publicURL(bo, s.Gateway)
	})
	return err
}

func (s *System) addHealthChecks(ctx context.Context, ledger *store.Store) error {
	if err := s.Manager.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return s.Manager.AddReadyzCheck("ledger", func(*http.Request) error { return ledger.Ping(ctx) })
}

// AddGateway builds a gateway with options o on the system's manager,
// ledger, system namespace and blob store, and adds it to the manager.
// NewSystem adds SystemOptions.Gateway this way; the load harness adds
// more replicas to compare their configurations in one process.
func (s *System) AddGateway(o Options) (*server.Server, error) {
	o.SystemNamespace, o.Blobs, o.lines = s.namespace, s.Blobs, s.lines
	return Gateway(s.Manager, s.ledger, s.Upstreams, s.guard, o)
}

// Start runs the manager (controllers, gateway, endpoints) until ctx ends.
func (s *System) Start(ctx context.Context) error { return s.Manager.Start(ctx) }

func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}
