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
// serves the whole process, in the package variable stack: TestMain starts
// it before TestE2E and stops it after, around pgtest.Run, which stops the
// PostgreSQL server that test/pgtest shares among the specs needing one (the
// outage, crash and replica specs). Each spec
// gets a namespace of its own (specNamespace), created before it and deleted
// after it; its first account (newAccount) lives there, further accounts get
// namespaces of their own, deleted with it. Routes and prices of the platform
// stay in framework.SystemNamespace, where the gateway reads them. Specs that
// start processes of their own (a second control plane, `modelgate dev`,
// replicas, PostgreSQL) are Serial and carry labels: process, crash,
// shutdown, replicas, postgres, sqlite; the specs that run the real coding
// agents carry agents.
//
// The helpers take testing.TB, and a spec passes GinkgoTB() (t.Cleanup then
// runs as the spec's DeferCleanup; an assertion on another goroutine needs
// `defer GinkgoRecover()` there). Measured figures (the crash and replica
// specs) go through figures, which prints them as report entries even when
// the spec passes.
package e2e
