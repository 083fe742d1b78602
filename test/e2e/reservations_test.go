package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Reservations that never starve", func() {
	It("a $0.40 key runs Claude-Code-sized requests with the output cap lowered to what it pays for", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()

		// The fake answers as the Messages API does: never more output than
		// max_tokens, and stop_reason max_tokens when it runs into it. The
		// first answer ends on its own after 20 000 tokens.
		const firstOutput = 20000
		var mu sync.Mutex
		var caps []int64
		up := startFake(t, "anthropic")
		up.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			mt, _ := r.JSON()["max_tokens"].(float64)
			mu.Lock()
			defer mu.Unlock()
			caps = append(caps, int64(mt))
			if len(caps) == 1 && int64(mt) > firstOutput {
				return fakeupstream.Reply{Text: "done", StopReason: "end_turn", Usage: fakeupstream.Usage{InputTokens: 900, OutputTokens: firstOutput}}
			}
			return fakeupstream.Reply{Text: "cut", StopReason: "max_tokens", Usage: fakeupstream.Usage{InputTokens: 900, OutputTokens: int64(mt)}}
		})
		model := uniqueModel("starve")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "starve", "anthropic", up.URL, up.Key(), "up-starve"))
		keyQuota := int64(billing.QuotaPerUSD) * 40 / 100 // $0.40
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: ptr.To(keyQuota)})

		c := anthropicClient(acct.Key)
		prompt := strings.Repeat("Refactor the parser and keep the tests green. ", 60) // ~2.8 KB, as an agent's turn
		var bodyLen int64
		// fitted is the largest cap whose reservation (the input estimated
		// at one token per 3 bytes of body, $3/M, plus the output at $15/M,
		// rounded half up once) fits in avail.
		fitted := func(avail int64) int64 {
			in := (bodyLen + 2) / 3
			n := (2*avail - 1 - 3*in) / 15
			for textQuota(in, n+1) <= avail {
				n++
			}
			for textQuota(in, n) > avail {
				n--
			}
			return n
		}
		call := func() (*anthropic.Message, *http.Response, error) {
			// Streamed, as Claude Code does (the SDK refuses a non-streamed
			// call that may run this long).
			var resp *http.Response
			measure := aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
				bodyLen = r.ContentLength
				return next(r)
			})
			s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 32000,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}},
				aoption.WithResponseInto(&resp), measure)
			msg := &anthropic.Message{}
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					return nil, resp, err
				}
			}
			return msg, resp, s.Err()
		}
		lastCap := func() int64 {
			mu.Lock()
			defer mu.Unlock()
			return caps[len(caps)-1]
		}

		By("32 000 tokens at $15/M is $0.48: the first request is served with a lowered cap")
		msg, resp, err := call()
		g.Expect(err).NotTo(HaveOccurred())
		cap1, err := strconv.ParseInt(resp.Header.Get("x-modelgate-output-cap"), 10, 64)
		g.Expect(err).NotTo(HaveOccurred(), "the header names the lowered cap")
		g.Expect(cap1).To(BeNumerically(">", firstOutput))
		g.Expect(cap1).To(BeNumerically("<", 32000))
		g.Expect(cap1).To(Equal(fitted(keyQuota)), "the input estimate and cap1 output tokens fit in $0.40; one token more would not")
		g.Expect(lastCap()).To(Equal(cap1), "the upstream received the lowered max_tokens")
		g.Expect(string(msg.StopReason)).To(Equal("end_turn"))
		first := textQuota(900, firstOutput)
		ledgerUsed(t, acct, first)

		By("the second is lowered to what is left and runs into the upstream's own max_tokens")
		msg, resp, err = call()
		g.Expect(err).NotTo(HaveOccurred())
		cap2, err := strconv.ParseInt(resp.Header.Get("x-modelgate-output-cap"), 10, 64)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cap2).To(BeNumerically("<", cap1))
		g.Expect(cap2).To(Equal(fitted(keyQuota - first)))
		g.Expect(lastCap()).To(Equal(cap2))
		g.Expect(string(msg.StopReason)).To(Equal("max_tokens"))
		g.Expect(msg.Usage.OutputTokens).To(Equal(cap2))
		second := textQuota(900, cap2)
		ledgerUsed(t, acct, first+second)

		By("what is left does not pay for the input and one token: refused in Anthropic's shape, nothing sent upstream")
		sent := up.Count()
		_, _, err = call()
		var aerr *anthropic.Error
		g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
		g.Expect(aerr.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(errorType(t, aerr)).To(Equal("invalid_request_error"))
		g.Expect(up.Count()).To(Equal(sent))

		By("the usage rows add up to the used quota and the key never went below zero")
		rows := usageRows(t, acct, 2)
		var sum int64
		for _, r := range rows {
			sum += int64(r.Quota)
		}
		g.Expect(sum).To(Equal(first + second))
		b, err := stack.Ledger.TokenUsage(ctx, acct.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(b.Used)).To(Equal(sum))
		g.Expect(int64(b.Remain)).To(Equal(keyQuota - sum))
		g.Expect(b.Remain).To(BeNumerically(">=", 0))
	})

	It("100 concurrent max_tokens:64 requests on a key worth about ten are served, lowered, and never overspend it", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("sim-starve")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: ptr.To[int64](556)})
		c := anthropicClient(acct.Key)
		// ~300 bytes of body: 100 input tokens estimated (150 quota) and 64
		// output tokens (480) reserve 630, more than the whole key.
		prompt := strings.Repeat("say hi ", 35)
		var served, lowered, refused int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				var resp *http.Response
				_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}},
					aoption.WithResponseInto(&resp))
				mu.Lock()
				defer mu.Unlock()
				var aerr *anthropic.Error
				switch {
				case err == nil:
					served++
					if resp.Header.Get("x-modelgate-output-cap") != "" {
						lowered++
					}
				case errors.As(err, &aerr) && aerr.StatusCode == http.StatusBadRequest:
					refused++
				default:
					Fail("unexpected error: " + err.Error())
				}
			}()
		}
		wg.Wait()
		g.Expect(served).To(BeNumerically(">", 0))
		g.Expect(lowered).To(Equal(served), "no request fits with its whole cap")
		g.Expect(served + refused).To(Equal(100))
		rows := usageRows(t, acct, served)
		var sum int64
		for _, r := range rows {
			sum += int64(r.Quota)
		}
		b, err := stack.Ledger.TokenUsage(ctx, acct.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(b.Used)).To(Equal(sum), "usage rows add up to the used quota")
		g.Expect(b.Remain).To(BeNumerically(">=", 0), "never overspent")
		g.Expect(int64(b.Remain + b.Used)).To(Equal(int64(556)))
	})
})
