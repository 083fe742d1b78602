package browser

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/modelgate/modelgate/test/framework"
)

// One stack serves every browser test of the package: a process registers
// each controller name once.
var (
	stackOnce sync.Once
	shared    *framework.Stack
	sharedErr error
	// idp is the stack's OpenID Connect provider (the console's
	// --console-oidc-* flags point at it).
	idp         *framework.OIDCProvider
	publishOnce sync.Once
	publishErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = shared.Stop()
	}
	if idp != nil {
		_ = idp.Shutdown()
	}
	os.Exit(code)
}

// browserStack starts the package's stack on first use.
func browserStack(t *testing.T) *framework.Stack {
	t.Helper()
	stackOnce.Do(func() {
		ctrl.SetLogger(logr.Discard())
		dir, err := os.MkdirTemp("", "browser-test-")
		if err != nil {
			sharedErr = err
			return
		}
		if idp, sharedErr = framework.StartOIDC(); sharedErr != nil {
			return
		}
		shared, sharedErr = framework.StartStack(framework.StackOptions{Dir: dir, ConsoleOIDC: idp.ConsoleConfig(browserPlatformAdmins)})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// publishImage publishes the browser tests' image model once.
func publishImage(t *testing.T, stack *framework.Stack) {
	t.Helper()
	publishOnce.Do(func() {
		_, publishErr = stack.PublishSimulatedImage(context.Background(), browserImageModel, "0.04")
	})
	if publishErr != nil {
		t.Fatal(publishErr)
	}
}
