// Package upstreamenv_test runs the GenerationTask controller against real
// asynchronous upstreams (the fakes of test/fakeupstream) over a real
// kube-apiserver, with a manager that can be stopped and started again
// mid-task. It has its own control plane because the controllers suite's
// manager runs a GenerationTask reconciler without a blob store.
package upstreamenv_test

import (
	"context"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"io"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/test/framework"
)

const (
	systemNS = framework.SystemNamespace
	tenantNS = "tenant-upstream"
)

var (
	env    *framework.Env
	k8s    client.Client
	ledger *store.Store
	blobs  *blob.Store
	ctx    context.Context
	cancel context.CancelFunc
	// stopManager stops the running manager and waits until it has.
	stopManager func()
)

func TestUpstreamTasks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GenerationTask controller against asynchronous upstreams")
}

// startManager runs a manager with the GenerationTask controller only.
func startManager() {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// A restarted manager registers the same controller name again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	// The fakes listen on loopback, which the process's guard allows here.
	egress := upstream.NewEgress(upstream.EgressOptions{Guard: env.Guard, RootCAs: fakeupstream.RootCAs()})
	Expect((&generationtask.Reconciler{Client: mgr.GetClient(), Ledger: ledger, Upstreams: builtin.Registry(egress), Blobs: blobs, Downloads: egress.Downloads,
		Clock: clock.RealClock{}}).SetupWithManager(mgr)).To(Succeed())
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

// blobBytes reads a result URL's ("blob:<key>") bytes from the store.
func blobBytes(url string) []byte {
	GinkgoHelper()
	Expect(url).To(HavePrefix(tasks.BlobScheme))
	r, err := blobs.Open(ctx, strings.TrimPrefix(url, tasks.BlobScheme))
	Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	b, err := io.ReadAll(r)
	Expect(err).NotTo(HaveOccurred())
	return b
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = framework.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
	for _, ns := range []string{systemNS, tenantNS} {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	dir := GinkgoT().TempDir()
	ledger, err = store.Open(ctx, "sqlite://"+filepath.Join(dir, "ledger.db"))
	Expect(err).NotTo(HaveOccurred())
	blobs, err = blob.OpenLocal(blob.Config{Dir: filepath.Join(dir, "blobs"), SigningKey: []byte("upstream-suite-signing-key"),
		BaseURL: func() string { return "http://files.test" }})
	Expect(err).NotTo(HaveOccurred())
	startManager()
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
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
