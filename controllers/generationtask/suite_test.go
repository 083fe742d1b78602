package generationtask_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/gateway/store"
)

// The reconcilers run on a fake API client (no control plane) against a
// real ledger: the money paths are the store's own.

var (
	ledger *store.Store
	ctx    context.Context
	cancel context.CancelFunc
)

func TestGenerationTask(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GenerationTask reconcilers against a real ledger")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	ledger, err = store.Open(ctx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "ledger.db"))
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	cancel()
	if ledger != nil {
		Expect(ledger.Close()).To(Succeed())
	}
})
