// Package e2e runs the modelgate binary as a user would and talks to it over
// real HTTP and a real kubeconfig.
//
// The tests are Ginkgo v2 specs with Gomega assertions, run by TestE2E
// (suite_test.go) under plain `go test`:
//
//	go test ./test/e2e -count=1 -timeout 30m
//	go test ./test/e2e -count=1 -ginkgo.focus='upstream matrix' -ginkgo.v
//	go test ./test/e2e -count=1 -ginkgo.label-filter='crash' -ginkgo.v
//
// One stack (framework.Stack: control plane, ledger, controllers, gateway)
// serves the whole process, in the package variable stack. Each spec gets a
// namespace of its own (specNamespace), created before it and deleted after
// it; its first account (newAccount) lives there, further accounts get
// namespaces of their own, deleted with it. Routes and prices of the platform
// stay in framework.SystemNamespace, where the gateway reads them. Specs that
// start processes of their own (a second control plane, `modelgate dev`,
// replicas, PostgreSQL) are Serial and carry labels: process, crash,
// shutdown, replicas, postgres, sqlite.
//
// Plain `testing` tests still work while they are being converted: TestMain
// starts the stack before every test of the package and stops it after all of
// them, so a
//
//	func TestX(t *testing.T) { a := newAccount(t, ...); ... stack.BaseURL ... }
//
// shares the stack with the specs, whether it runs before or after TestE2E.
// The helpers take testing.TB: a plain test passes its *testing.T, a spec
// passes GinkgoTB() (t.Cleanup then runs as the spec's DeferCleanup). To
// convert such a test, move its body into an It of a Describe and begin the
// body with `t := GinkgoTB()`; a t.Run becomes an It of its own (or a By step
// when the cases share state), t.Parallel goes, and t.Errorf on another
// goroutine needs `defer GinkgoRecover()` there. When no plain test is left,
// the stack's start and stop can move from TestMain into BeforeSuite and
// AfterSuite.
package e2e
