package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/test/framework"
	"github.com/modelgate/modelgate/test/pgtest"
)

// stack is the whole system in this process, shared by every spec (see
// doc.go).
var stack *framework.Stack

// apiCheck validates every response a spec receives from the stack's
// gateway against /openapi.json (the document in gateway/http/openapi).
var apiCheck *framework.APICheck

// stackDir holds the stack's ledger and usage spool.
var stackDir string

// TestMain starts the one stack before TestE2E runs the specs and stops it
// after them. pgtest.Run stops the PostgreSQL server test/pgtest shares
// among the specs that need one (the outage, crash and replica specs).
func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevelWarn())))
	code, err := runWithStack(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func runWithStack(m *testing.M) (int, error) {
	var err error
	if stackDir, err = os.MkdirTemp("", "modelgate-e2e-"); err != nil {
		return 1, err
	}
	defer os.RemoveAll(stackDir)
	if stack, err = framework.StartStack(framework.StackOptions{Dir: stackDir}); err != nil {
		return 1, fmt.Errorf("start the stack: %w", err)
	}
	if apiCheck, err = framework.CheckAPIResponses(stack); err != nil {
		_ = stack.Stop()
		return 1, err
	}
	code := pgtest.Run(m)
	if err := stack.Stop(); err != nil {
		return code, fmt.Errorf("stop the stack: %w", err)
	}
	return code, nil
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "modelgate end to end: the binary's composition over real HTTP, a real control plane and a real ledger")
}

var _ = BeforeSuite(func() {
	Expect(stack).NotTo(BeNil(), "TestMain starts the stack")
	Expect(stack.BaseURL).NotTo(BeEmpty())
})

// Every response of the gateway that a spec received validates against the
// OpenAPI document; the spec that received one that does not fails.
var _ = AfterEach(func() {
	Expect(apiCheck.Take()).To(BeEmpty(), "responses that do not validate against /openapi.json")
})

var _ = AfterSuite(func() {
	Expect(apiCheck.Take()).To(BeEmpty(), "responses that do not validate against /openapi.json (received outside a spec)")
	fmt.Fprintf(GinkgoWriter, "%d gateway responses validated against /openapi.json\n", apiCheck.Checked())
})

// specNamespace is the namespace of the running spec: BeforeEach creates it,
// DeferCleanup deletes it with the other namespaces the spec's accounts got.
// The spec's first account (newAccount) lives in it; routes and prices of the
// platform stay in framework.SystemNamespace, where the gateway reads them.
var specNamespace string

// specAccounts counts the accounts the running spec made in specNamespace
// (one Tenant per namespace: the second account gets a namespace of its own).
var specAccounts int

var _ = BeforeEach(func() {
	ns := framework.NewNamespace("spec")
	Expect(stack.Client.Create(context.Background(), ns)).To(Succeed())
	specNamespace, specAccounts = ns.Name, 0
	deleteNamespaceAfterSpec(ns.Name)
	DeferCleanup(func() { specNamespace = "" })
})

// deleteNamespaceAfterSpec deletes the namespace when the spec ends. The
// control plane has no namespace controller, so its objects stay (as the
// ledger rows they name do); the namespace is marked terminating and takes
// no new objects.
func deleteNamespaceAfterSpec(name string) {
	DeferCleanup(func(ctx SpecContext) {
		ns := &corev1.Namespace{}
		ns.Name = name
		Expect(stack.Client.Delete(ctx, ns)).To(Succeed())
	})
}

// figures logs a run's measured figures (docs/reliability.md quotes them):
// to the spec's log and, when t is a spec, as a report entry that go test
// prints even for a passing spec.
func figures(t testing.TB, name, format string, args ...any) {
	t.Helper()
	t.Logf(format, args...)
	if _, spec := t.(*GinkgoTBWrapper); spec {
		AddReportEntry(name, fmt.Sprintf(format, args...))
	}
}
