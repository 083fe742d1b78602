package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/test/framework"
)

var (
	stack *framework.Stack
	ctx   = context.Background()
	// usage holds the gateway's usage acknowledgements on demand (durable_test.go).
	usage = &usageGate{}
	// stackDir is the stack's data directory (ledger, usage spool).
	stackDir string
)

func TestHandlers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Gateway endpoints over real HTTP, with the controllers and a real ledger")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	stackDir = GinkgoT().TempDir()
	// The batch specs write a Batch's status by hand, as the controller
	// would (controllers/batch has its own specs); no controller races them.
	stack, err = framework.StartStack(framework.StackOptions{Dir: stackDir, WrapUsageSink: usage.wrap, NoBatchController: true})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if stack != nil {
		Expect(stack.Stop()).To(Succeed())
	}
})

// call sends a request and decodes the JSON answer into a map.
func call(method, path string, headers map[string]string, body any) (int, map[string]any, http.Header) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = bytes.NewBufferString(b)
		default:
			buf, err := json.Marshal(b)
			Expect(err).NotTo(HaveOccurred())
			rd = bytes.NewReader(buf)
		}
	}
	req, err := http.NewRequest(method, stack.BaseURL+path, rd)
	Expect(err).NotTo(HaveOccurred())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	var out map[string]any
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		Expect(dec.Decode(&out)).To(Succeed(), "body: %s", raw)
	}
	return resp.StatusCode, out, resp.Header
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
