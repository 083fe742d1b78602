package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/store"
)

var _ = Describe("Graceful shutdown", Serial, Label("shutdown"), func() {
	// It sends SIGTERM to
	// `modelgate dev` while 50 streaming requests are in flight: every stream
	// completes, every request is billed, and every usage row is in the
	// database after the process exits.
	It("graceful shutdown finishes and bills in flight streams", func() {
		t := GinkgoTB()
		if testing.Short() {
			Skip("starts a control plane")
		}
		g := NewWithT(t)
		bin := buildBinary(t)
		dataDir := t.TempDir()
		p := startDev(t, bin, dataDir)

		const streams = 50
		body := `{"model":"sim-chat","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"[sim:tokens=300,delay=5ms] go"}]}`
		var started, wg sync.WaitGroup
		started.Add(streams)
		results := make(chan string, streams)
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", p.info.GatewayURL+"/v1/messages", strings.NewReader(body))
				req.Header.Set("x-api-key", p.info.APIKey)
				req.Header.Set("content-type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					started.Done()
					results <- "error: " + err.Error()
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				first, last := true, ""
				for sc.Scan() {
					if first {
						started.Done()
						first = false
					}
					if strings.HasPrefix(sc.Text(), "event: ") {
						last = strings.TrimPrefix(sc.Text(), "event: ")
					}
				}
				if first {
					started.Done()
				}
				results <- last
			}()
		}
		started.Wait() // every stream has begun
		g.Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		wg.Wait()
		close(results)
		for r := range results {
			g.Expect(r).To(Equal("message_stop"), "every in-flight stream completes")
		}
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		var err error
		g.Eventually(done, time.Minute).Should(Receive(&err))
		g.Expect(err).NotTo(HaveOccurred(), "log: %s", p.tail())

		ledger, err := store.Open(context.Background(), p.info.Database)
		g.Expect(err).NotTo(HaveOccurred())
		defer ledger.Close()
		now := time.Now().Unix()
		page, err := ledger.SummarizeUsage(context.Background(), store.UsageQuery{UserID: p.info.UserID, Start: now - 3600, End: now + 60})
		g.Expect(err).NotTo(HaveOccurred())
		var rows int64
		var charged int64
		for _, r := range page.Rows {
			rows += r.RequestCount
			charged += int64(r.Quota)
		}
		g.Expect(rows).To(Equal(int64(streams)), "every request has its usage row")
		b, err := ledger.TokenUsage(context.Background(), p.info.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(b.Used)).To(Equal(charged), "the ledger's used quota equals the rows")
		leased, err := ledger.TokenLeased(context.Background(), p.info.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(int64(leased)).To(BeZero(), "unused leases were returned")
	})
})
