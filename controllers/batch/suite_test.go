package batch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/wire"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// The Batch controller runs in a whole system (controllers and gateway on
// one manager, as modelgate dev and the test framework build it) on a real
// control plane, a real SQLite ledger and a local blob store; lines reach a
// fake OpenAI upstream over loopback. A spec may stop the system and start
// another on the same ledger and blob store: a restarted manager.

var (
	env    *framework.Env
	ledger *store.Store
	blobs  *blob.Store
	fstore *files.Store
	dir    string
	sys    *system
	seq    int
)

// passBudget is short so that counts move, and cancellations are seen,
// while the specs watch.
const passBudget = 300 * time.Millisecond

func TestBatch(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Batch controller on envtest, a real ledger and the gateway's data path")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start()
	Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.SystemNamespace}})).To(Succeed())
	dir = GinkgoT().TempDir()
	ledger, err = store.Open(ctx, "sqlite://"+filepath.Join(dir, "ledger.db"))
	Expect(err).NotTo(HaveOccurred())
	blobs, err = blob.OpenLocal(blob.Config{Dir: filepath.Join(dir, "blobs"), SigningKey: []byte("batch-suite-signing-key"),
		BaseURL: func() string { return "http://127.0.0.1" }})
	Expect(err).NotTo(HaveOccurred())
	fstore = files.New(ledger, blobs, files.Options{})
	sys = startSystem()
})

var _ = AfterSuite(func() {
	if sys != nil {
		sys.stop()
	}
	if ledger != nil {
		_ = ledger.Close()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// system is one run of the manager.
type system struct {
	cancel context.CancelFunc
	done   chan error
}

// startSystem builds and starts a system on the suite's control plane,
// ledger and blob store, with a replica ID (leases, spool) of its own.
func startSystem() *system { return start(true) }

// startManager starts a system without a gateway, as `modelgate manager`
// runs: the batch lines run on a text pipeline of the manager's own.
func startManager() *system { return start(false) }

func start(withGateway bool) *system {
	seq++
	ctx, cancel := context.WithCancel(context.Background())
	o := wire.SystemOptions{
		Config: env.Config, Ledger: ledger, SystemNamespace: framework.SystemNamespace,
		Controllers:  &controllers.Options{SyncPeriod: time.Second, BatchPassBudget: passBudget, BatchPollInterval: 100 * time.Millisecond},
		ManagerBlobs: wire.Options{Blobs: blobs, DataDir: dir},
		Guard:        env.Guard, UpstreamRootCAs: fakeupstream.RootCAs(), SkipControllerNameValidation: true,
	}
	if withGateway {
		o.Gateway = &wire.Options{Listen: "127.0.0.1:0", ShutdownGrace: time.Second, DataDir: dir, Blobs: blobs,
			ReplicaID: fmt.Sprintf("batch-suite-%d", seq), NoConsole: true}
	}
	s, err := wire.NewSystem(ctx, o)
	Expect(err).NotTo(HaveOccurred())
	env.Served = s.Manager.GetCache()
	out := &system{cancel: cancel, done: make(chan error, 1)}
	go func() { out.done <- s.Start(ctx) }()
	return out
}

// stop stops the system as a manager's pod is stopped: the controllers
// finish their passes, the gateway drains.
func (s *system) stop() {
	s.cancel()
	Eventually(s.done, framework.LongTimeout).Should(Receive())
}
