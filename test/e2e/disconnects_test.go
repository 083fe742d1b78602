package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Clients that hang up mid stream", Serial, func() {
	// 200 streams whose clients hang up after the first content event: each
	// is drained for its usage and billed, and once they are done the
	// gateway holds no goroutine for any of them (connections the pools keep
	// idle are closed before counting: they are reuse, not a leak).
	It("leave no goroutine behind and are each billed", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := startFake(t, "anthropic")
		fake.SetDefault(fakeupstream.Reply{Text: strings.TrimSpace(strings.Repeat("word ", 100)), Gap: 3 * time.Millisecond,
			Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 100}})
		model := uniqueModel("hangup")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "up-model"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
		settle := func() int {
			client.CloseIdleConnections()
			stack.Egress.API.CloseIdleConnections()
			runtime.GC()
			return runtime.NumGoroutine()
		}
		before := settle()

		const streams = 200
		var wg sync.WaitGroup
		sem := make(chan struct{}, 50)
		for i := range streams {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				body := fmt.Sprintf(`{"model":%q,"max_tokens":500,"stream":true,"messages":[{"role":"user","content":"talk %d"}]}`, model, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.BaseURL+"/v1/messages", strings.NewReader(body))
				req.Header.Set("x-api-key", acct.Key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() && !strings.Contains(sc.Text(), "content_block_delta") {
				}
				cancel() // hang up after the first content event
				_ = resp.Body.Close()
			}()
		}
		wg.Wait()

		// Each drained to the upstream's own usage: 9 input and 100 output
		// tokens a stream.
		ledgerUsed(t, acct, streams*textQuota(9, 100))
		g.Eventually(settle, 30*time.Second, 250*time.Millisecond).Should(BeNumerically("<=", before+20),
			"goroutines after %d hung-up streams (%d before)", streams, before)
	})
})
