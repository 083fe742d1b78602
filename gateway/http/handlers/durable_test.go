package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

// usageGate sits between the handlers and the usage writer. While a model
// is held, the acknowledgement of its rows (the writer's, which comes after
// the journal fsync) is passed on only after release.
type usageGate struct {
	mu      sync.Mutex
	model   string
	entered chan struct{}
	release chan struct{}
	// refused is a model whose rows the writer refuses (errors_test.go).
	refused string
}

// refuse makes the writer refuse model's rows, as a full disk would, until
// the returned func is called.
func (g *usageGate) refuse(model string) (restore func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = model
	return func() {
		g.mu.Lock()
		g.refused = ""
		g.mu.Unlock()
	}
}

func (g *usageGate) wrap(s handlers.UsageSink) handlers.UsageSink {
	return gatedSink{s, g}
}

// hold holds model's acknowledgements; entered receives when one is held.
func (g *usageGate) hold(model string) (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.model, g.entered, g.release = model, make(chan struct{}, 1), make(chan struct{})
	rel := g.release
	return g.entered, func() {
		g.mu.Lock()
		g.model = ""
		g.mu.Unlock()
		close(rel)
	}
}

type gatedSink struct {
	handlers.UsageSink
	g *usageGate
}

func (s gatedSink) Submit(ctx context.Context, row store.UsageRow) (handlers.Durable, error) {
	s.g.mu.Lock()
	refused := s.g.refused
	s.g.mu.Unlock()
	if refused != "" && row.ModelName == refused {
		return nil, errors.New("usage spool refused the row")
	}
	d, err := s.UsageSink.Submit(ctx, row)
	s.g.mu.Lock()
	model, entered, release := s.g.model, s.g.entered, s.g.release
	s.g.mu.Unlock()
	if err != nil || model == "" || row.ModelName != model {
		return d, err
	}
	select {
	case entered <- struct{}{}:
	default:
	}
	return heldAck{d, release}, nil
}

type heldAck struct {
	handlers.Durable
	release chan struct{}
}

func (a heldAck) Wait(ctx context.Context) error {
	select {
	case <-a.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return a.Durable.Wait(ctx)
}

// spooled tells whether the gateway's usage spool files hold requestID.
func spooled(requestID string) bool {
	files, err := filepath.Glob(filepath.Join(stackDir, "usage-*.spool*"))
	Expect(err).NotTo(HaveOccurred())
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte(`"request_id":"`+requestID+`"`)) {
			return true
		}
	}
	return false
}

// quiet is how long a test listens for bytes that must not come while the
// acknowledgement is held. The wrong order (final bytes before the row is
// durable) would have put them on the socket before the row was even
// submitted, so they would arrive at once; the right order sends nothing
// whatever the wait.
const quiet = 300 * time.Millisecond

var _ = Describe("an answer is complete only when its usage row is durable", Ordered, func() {
	var (
		acct                *framework.Account
		messages, openaiSim string
		rows                int64
	)

	BeforeAll(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To(int64(5 * billing.QuotaPerUSD))})
		Expect(err).NotTo(HaveOccurred())
		messages = pricedTextRoute("durable-messages", "simulated", "default")
		openaiSim = pricedTextRoute("durable-openai", "simulated-openai", "default")
	})

	storedRows := func() int64 {
		now := time.Now().Unix()
		p, err := stack.Ledger.SummarizeUsage(ctx, store.UsageQuery{UserID: acct.Tenant.Status.UserID, Start: now - 3600, End: now + 3600})
		Expect(err).NotTo(HaveOccurred())
		var n int64
		for _, r := range p.Rows {
			n += r.RequestCount
		}
		return n
	}

	// durable expects requestID's row, the rows-th of the account, in the
	// spool or the ledger. A row moves from one to the other while the
	// writer works; a second look covers a move during the first.
	durable := func(requestID string) {
		GinkgoHelper()
		for range 3 {
			if spooled(requestID) || storedRows() >= rows {
				return
			}
		}
		Fail(fmt.Sprintf("request %s: the answer arrived, its row is neither in the spool nor in the ledger", requestID))
	}

	post := func(path, body string) *http.Request {
		req, err := http.NewRequest("POST", stack.BaseURL+path, strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		req.Header.Set("Content-Type", "application/json")
		return req
	}

	It("sends a JSON answer only once its row is durable", func() {
		for _, c := range []struct{ path, model, body string }{
			{"/v1/messages", messages, `{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`},
			{"/v1/chat/completions", openaiSim, `{"model":%q,"messages":[{"role":"user","content":"hello"}]}`},
			{"/v1/responses", openaiSim, `{"model":%q,"input":"hello"}`},
		} {
			By(c.path)
			entered, release := usage.hold(c.model)
			answered := make(chan *http.Response, 1)
			go func() {
				defer GinkgoRecover()
				resp, err := http.DefaultClient.Do(post(c.path, fmt.Sprintf(c.body, c.model)))
				Expect(err).NotTo(HaveOccurred())
				answered <- resp
			}()
			Eventually(entered).WithTimeout(framework.Timeout).Should(Receive(), "the row was submitted")
			Consistently(answered, quiet).ShouldNot(Receive(), "the answer left before its row was durable")

			release()
			var resp *http.Response
			Eventually(answered).WithTimeout(framework.Timeout).Should(Receive(&resp))
			rows++
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(200), "body: %s", body)

			// Not held: when the answer arrives its row is on disk.
			resp, err = http.DefaultClient.Do(post(c.path, fmt.Sprintf(c.body, c.model)))
			Expect(err).NotTo(HaveOccurred())
			rows++
			durable(resp.Header.Get("request-id"))
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(200), "body: %s", body)
		}
		Eventually(storedRows).WithTimeout(framework.Timeout).Should(Equal(rows))
	})

	It("sends a stream's terminal event only once its row is durable", func() {
		for _, c := range []struct{ path, model, body, terminal string }{
			{"/v1/messages", messages, `{"model":%q,"max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`, "message_stop"},
			{"/v1/chat/completions", openaiSim, `{"model":%q,"stream":true,"messages":[{"role":"user","content":"hello"}]}`, "[DONE]"},
			{"/v1/responses", openaiSim, `{"model":%q,"stream":true,"input":"hello"}`, "response.completed"},
		} {
			By(c.path)
			entered, release := usage.hold(c.model)
			resp, err := http.DefaultClient.Do(post(c.path, fmt.Sprintf(c.body, c.model)))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(200))
			chunks := make(chan []byte, 1024)
			go func() {
				defer close(chunks)
				for {
					buf := make([]byte, 4096)
					n, err := resp.Body.Read(buf)
					if n > 0 {
						chunks <- buf[:n]
					}
					if err != nil {
						return
					}
				}
			}()
			var got bytes.Buffer
			ended := false
			received := func() string {
				for {
					select {
					case c, ok := <-chunks:
						if !ok {
							ended = true
							return got.String()
						}
						got.Write(c)
					default:
						return got.String()
					}
				}
			}
			Eventually(entered).WithTimeout(framework.Timeout).Should(Receive(), "the row was submitted")
			Consistently(received, quiet).ShouldNot(ContainSubstring(c.terminal), "the terminal event left before the row was durable")
			Expect(ended).To(BeFalse(), "the stream ended before its row was durable: %s", got.String())
			Expect(got.String()).To(ContainSubstring("data: "), "the events before the terminal one are not held")

			release()
			for !strings.Contains(got.String(), c.terminal) {
				var chunk []byte
				Eventually(chunks).WithTimeout(framework.Timeout).Should(Receive(&chunk))
				Expect(chunk).NotTo(BeNil(), "the stream ended without %s: %s", c.terminal, got.String())
				got.Write(chunk)
			}
			rows++
			durable(resp.Header.Get("request-id"))
			for range chunks {
			}
			resp.Body.Close()
		}
		Eventually(storedRows).WithTimeout(framework.Timeout).Should(Equal(rows))
	})
})
