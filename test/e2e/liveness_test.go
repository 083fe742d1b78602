package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Concurrent first use of a small balance", func() {
	// A key whose balance covers about ten calls, hit by 100 concurrent
	// requests on its first use: at least one is served, and no more than the
	// balance covers. (The reservation for max_tokens 64 is about 495 quota;
	// each call is charged about 53.)
	It("small balance serves concurrent first use", func() {
		t := GinkgoTB()
		model := uniqueModel("sim-small")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		const balance = 556
		for _, viaAPI := range []bool{false, true} {
			By(fmt.Sprintf("key made by the API: %v", viaAPI))
			func() {
				g := NewWithT(t)
				q := int64(balance)
				a := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
				key := a.Key
				if viaAPI {
					key = createKey(t, a.Key, balance)
				}
				// Published on the API server is not yet published in this
				// gateway's cache: wait until the gateway lists the model.
				g.Eventually(func() []string {
					_, _, body := getJSON(t, "/v1/models", key)
					return ids(body)
				}, framework.Timeout, framework.Interval).Should(ContainElement(model))
				statuses, served := burst(t, key, model, 100)
				t.Logf("statuses: %v", statuses)
				g.Expect(served).To(BeNumerically(">=", 1), "one reservation fits the balance: %v", statuses)
				g.Eventually(func(g Gomega) {
					remain, used := keyBalance(g, stack.BaseURL, key)
					g.Expect(used).To(BeNumerically(">", 0))
					g.Expect(used).To(BeNumerically("<=", balance), "never more than the balance")
					g.Expect(remain+used).To(BeNumerically("==", balance), "what was not charged is back")
				}, framework.Timeout, framework.Interval).Should(Succeed())
				for code := range statuses {
					g.Expect(code).To(BeElementOf(200, 400), "served, or refused for quota with the contract's error")
				}
			}()
		}
	})
})

// burst sends n concurrent POST /v1/messages and reports the status counts
// and how many were served (200 with a complete body).
func burst(t testing.TB, key, model string, n int) (map[int]int, int) {
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 64,
		"messages": []map[string]any{{"role": "user", "content": "Say hello in one short sentence."}}})
	var mu sync.Mutex
	statuses := map[int]int{}
	served := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer GinkgoRecover() // t.Errorf of a spec fails it by a panic
			defer wg.Done()
			<-start
			req, _ := http.NewRequestWithContext(context.Background(), "POST", stack.BaseURL+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request: %v", err)
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			var msg struct {
				Type string `json:"type"`
			}
			if err == nil && resp.StatusCode == 200 && json.Unmarshal(raw, &msg) == nil && msg.Type == "message" {
				served++
			} else if resp.StatusCode != 200 && statuses[resp.StatusCode] == 1 {
				t.Logf("%d: %s", resp.StatusCode, raw)
			}
		}()
	}
	close(start)
	wg.Wait()
	return statuses, served
}

// keyBalance reads GET /v1/balance of a key on the gateway at base: remain
// (leases included) and used quota.
func keyBalance(g Gomega, base, key string) (remain, used int64) {
	req, _ := http.NewRequest("GET", base+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var b struct {
		RemainQuota int64 `json:"remain_quota"`
		UsedQuota   int64 `json:"used_quota"`
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&b)).To(Succeed())
	return b.RemainQuota, b.UsedQuota
}

// createKey makes a key with POST /v1/tokens and returns it.
func createKey(t testing.TB, parent string, quota int64) string {
	g := NewWithT(t)
	body, _ := json.Marshal(map[string]any{"name": "small", "remain_quota": quota})
	req, _ := http.NewRequest("POST", stack.BaseURL+"/v1/tokens", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+parent)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var out struct {
		Success bool
		Message string
		Data    struct{ Key string }
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
	g.Expect(out.Success).To(BeTrue(), out.Message)
	return "sk-" + out.Data.Key
}
