package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// videoTask is the part of the contract's task object these tests read.
type videoTask struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress int    `json:"progress"`
	Result   *struct {
		Type string `json:"type"`
		Data []struct {
			URL string `json:"url"`
		} `json:"data"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Billing *struct {
		Status  string `json:"status"`
		CostUSD string `json:"cost_usd"`
	} `json:"billing"`
}

// videoBody is a 16:9 video request of duration seconds.
func videoBody(model string, duration int) string {
	return fmt.Sprintf(`{"model":%q,"prompt":"a lighthouse at dusk","duration":%d,"ratio":"16:9"}`, model, duration)
}

func videoCall(t testing.TB, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, stack.BaseURL+path, strings.NewReader(body))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

var _ = Describe("The OpenAI videos upstream", func() {
	// A video task through the gateway on OpenAI's Videos
	// API (the fake): submitted, polled through a 429, the MP4 downloaded into
	// the blob store and served by the gateway, billed by the clip's length;
	// a moderated video fails with content_policy_violation and is refunded.
	It("OpenAI videos", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewOpenAIVideos()
		t.Cleanup(fake.Close)
		// A video model on the Videos API fake, 0.05 USD per output second.
		model := vendorModel{prefix: "sora", provider: "openai", baseURL: fake.URL + "/v1", upstream: "sora-2", key: fake.Key(),
			typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond,
				PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		mp4 := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("sora frames for the e2e")...)
		fake.SetPlan(fakeupstream.VideoPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: mp4})
		task := finalTask(t, acct.Key, "videos", videoBody(model, 8))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Progress).To(Equal(100))
		g.Expect(task.Result.Type).To(Equal("video"))
		g.Expect(task.Result.Data).To(HaveLen(1))
		resp, err := http.Get(task.Result.Data[0].URL)
		g.Expect(err).NotTo(HaveOccurred())
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(got).To(Equal(mp4), "the gateway serves the stored copy")
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.4"), "8 s at 0.05 USD")
		ledgerUsed(t, acct, 200000)

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal("/v1/videos"))
		g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fake.Key()))
		g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "sora-2", "prompt": "a lighthouse at dusk", "seconds": "8", "size": "1280x720"}))
		g.Expect(fake.Count(http.MethodPost, "/v1/videos")).To(Equal(1))

		fake.SetPlan(fakeupstream.VideoPlan{Polls: 1, FailCode: "moderation_blocked", FailMessage: "Your request was blocked by our moderation system."})
		task = finalTask(t, acct.Key, "videos", videoBody(model, 4))
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(task.Error.Message).To(Equal("Your request was blocked by our moderation system."))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 200000)
	})
})
