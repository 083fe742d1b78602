package e2e

import (
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/test/framework"
	"github.com/modelgate/modelgate/test/pgtest"
)

// stack is the whole system in this process, shared by the SDK tests.
var stack *framework.Stack

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevelWarn())))
	dir, err := os.MkdirTemp("", "modelgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stack, err = framework.StartStack(framework.StackOptions{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the stack:", err)
		os.Exit(1)
	}
	code := pgtest.Run(m) // stops the PostgreSQL server the outage test starts
	if err := stack.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the stack:", err)
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
