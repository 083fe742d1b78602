package controllers_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/test/framework"
)

var (
	env    *framework.Env
	k8s    client.Client
	ledger *store.Store
	ctx    context.Context
	cancel context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers against a real kube-apiserver and a real ledger")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = framework.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client

	ledger, err = store.Open(ctx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "ledger.db"))
	Expect(err).NotTo(HaveOccurred())

	startManager()
})

// stopManager stops the running manager and waits until it has.
var stopManager func()

// startManager runs the controllers as a manager process does, on the
// suite's control plane and ledger. A spec that restarts the manager calls
// stopManager and then startManager: the new one knows only what the API
// server and the ledger hold.
func startManager() {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A restarted manager registers the same controller names again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(index.AddIndexes(ctx, mgr.GetFieldIndexer())).To(Succeed())
	// A short sync period lets specs watch mirrored ledger figures move.
	// The webhook receivers listen on loopback, which env.Guard allows (as
	// --allow-private-networks would).
	Expect(controllers.Setup(mgr, controllers.Options{Ledger: ledger, SyncPeriod: time.Second, Upstreams: builtin.Registry(upstream.Egress{}),
		Guard:         env.Guard,
		KnownProvider: func(name string) bool { return name == "simulated" || name == "openai" || name == "anthropic" }})).To(Succeed())
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	stopManager = func() {
		mcancel()
		Eventually(done, framework.Timeout).Should(BeClosed())
	}
}

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if ledger != nil {
		Expect(ledger.Close()).To(Succeed())
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
