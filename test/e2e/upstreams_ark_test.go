package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// arkTask is the part of the task object the Ark tests read beyond
// videoTask: the token usage a token-priced model settled on.
type arkTask struct {
	videoTask
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

func getArkTask(t testing.TB, key, family, id string) arkTask {
	t.Helper()
	code, raw := videoCall(t, http.MethodGet, "/v1/"+family+"/generations/"+id, key, "")
	NewWithT(t).Expect(code).To(Equal(http.StatusOK), "%s", raw)
	var task arkTask
	NewWithT(t).Expect(json.Unmarshal(raw, &task)).To(Succeed())
	return task
}

// keyRemain waits until the key's remaining quota (its 5 USD less what is
// reserved or charged) is want.
func keyRemain(t testing.TB, a *framework.Account, want billing.Quota) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		b, err := stack.Ledger.TokenUsage(context.Background(), a.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Remain).To(Equal(want))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
}

func download(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	NewWithT(t).Expect(resp.StatusCode).To(Equal(http.StatusOK))
	b, _ := io.ReadAll(resp.Body)
	return b
}

var _ = Describe("The Ark upstream", func() {
	// TestArkSeedreamImages: a multi-image group through the gateway on Ark's
	// Seedream API (the fake): n = 3 with two reference images is sent as a
	// sequential group of at most 3; the model makes 2, both stored and served
	// by the gateway, billed per generated image (2 × 0.03 USD after 3 were
	// reserved); a prompt refused by Ark's moderation fails with
	// content_policy_violation and is refunded.
	It("generates Seedream images billed per delivered image, and answers a refusal at submission with 422", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewArk()
		t.Cleanup(fake.Close)
		model := vendorModel{prefix: "seedream", provider: "ark", baseURL: fake.URL, upstream: "doubao-seedream-4-0-250828", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileMultiImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest,
				PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.03"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		// The gateway probes reference images of this family: serve real PNGs.
		refs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(fakeupstream.PNG(64, 48, 9))
		}))
		t.Cleanup(refs.Close)
		garden, bench := refs.URL+"/garden.png", refs.URL+"/bench.png"
		body := fmt.Sprintf(`{"model":%q,"prompt":"the same garden in three seasons","n":3,"size":"16:9",
			"image_urls":[%q,%q],"metadata":{"resolution":"2K","watermark":false}}`, model, garden, bench)

		fake.SetPlan(fakeupstream.ArkPlan{Images: 2})
		task := finalTask(t, acct.Key, "images", body)
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(task.Result.Data).To(HaveLen(2), "the images the model made")
		for i, d := range task.Result.Data {
			want, _ := fakeupstream.DefaultOutput("image", i)
			g.Expect(download(t, d.URL)).To(Equal(want), "the gateway serves the stored copy of image %d", i)
			g.Expect(d.URL).NotTo(HavePrefix(fake.URL))
		}
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.06"), "two generated images at 0.03 USD")
		ledgerUsed(t, acct, 30000)

		sent := fake.Requests()[0]
		g.Expect(sent.Path).To(Equal("/api/v3/images/generations"))
		g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fake.Key()))
		g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "doubao-seedream-4-0-250828", "prompt": "the same garden in three seasons",
			"image": []any{garden, bench}, "size": "2560x1440",
			"sequential_image_generation": "auto", "sequential_image_generation_options": map[string]any{"max_images": float64(3)},
			"optimize_prompt_options": map[string]any{"mode": "standard"},
			"response_format":         "url", "stream": false, "watermark": false}))

		fake.Fail(fakeupstream.ArkFailure{Status: http.StatusBadRequest, Code: "InputTextSensitiveContentDetected",
			Message: "The request failed because the input text may contain sensitive information."})
		// Refused at submission: the POST itself answers 422 (the submit wait),
		// and nothing is charged.
		expectRefusedAtSubmission(t, acct.Key, "/v1/images/generations", body, "the input text may contain sensitive information")
		ledgerUsed(t, acct, 30000)
	})

	// TestArkSeedanceTokenPricedVideo: a token-priced Seedance video through
	// the gateway: the submission reserves Ark's token formula for the largest
	// 720p size (1280x736 × 24 fps × 5 s / 1024 = 110 400 tokens, plus the
	// prompt's 24 bytes), the task is polled through a 429, queued and running
	// (progress shown), the MP4 is stored and served byte for byte, and the
	// charge is the reported completion_tokens exactly (4:3 at 720p, 1112x834:
	// 108 680 tokens at 2.5 USD per million); a failed task and a moderated
	// one are refunded.
	It("runs a token-priced Seedance video billed on its completion tokens", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewArk()
		t.Cleanup(fake.Close)
		model := vendorModel{prefix: "seedance", provider: "ark", baseURL: fake.URL, upstream: "doubao-seedance-1-0-pro-250528", key: fake.Key(),
			typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerToken,
				PriceBasis: v1.BasisTotalTokens, Unit: v1.Unit1MTokens, UnitPrice: "2.5"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		body := fmt.Sprintf(`{"model":%q,"prompt":"a lighthouse keeper wave","duration":5,"ratio":"adaptive","resolution":"720p",
			"audio":false,"image_with_roles":[{"url":"https://img.example/keeper.png","role":"first_frame"}]}`, model)

		mp4 := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("seedance frames for the e2e")...)
		fake.SetPlan(fakeupstream.ArkPlan{Queued: 1, Polls: 3, RateLimited: 1, RetryAfter: "1", Video: mp4, Ratio: "4:3"})
		code, raw := videoCall(t, http.MethodPost, "/v1/videos/generations", acct.Key, body)
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		var sub videoTask
		g.Expect(json.Unmarshal(raw, &sub)).To(Succeed())
		// (110 400 + 24) tokens × 2.5 USD per million = 0.27606 USD reserved.
		keyRemain(t, acct, 5*billing.QuotaPerUSD-138030)

		progress := 0
		var task arkTask
		g.Eventually(func() string {
			task = getArkTask(t, acct.Key, "videos", sub.ID)
			if task.Status == "in_progress" {
				progress = max(progress, task.Progress)
			}
			return task.Status
		}, 60*time.Second, 100*time.Millisecond).Should(BeElementOf("completed", "failed"))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		g.Expect(progress).To(BeNumerically(">", 0), "a running task shows progress")
		g.Expect(progress).To(BeNumerically("<", 100))
		g.Expect(task.Result.Type).To(Equal("video"))
		g.Expect(download(t, task.Result.Data[0].URL)).To(Equal(mp4), "the gateway serves the stored copy")
		tokens := fakeupstream.ArkVideoTokens(1112, 834, 24, 5)
		g.Expect(tokens).To(Equal(int64(108680)))
		g.Expect(task.Usage).NotTo(BeNil())
		g.Expect(task.Usage.OutputTokens).To(Equal(tokens))
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.2717"), "108 680 completion tokens at 2.5 USD per million")
		ledgerUsed(t, acct, 135850)

		sent := fake.Requests()[0]
		g.Expect(sent.Method + " " + sent.Path).To(Equal("POST /api/v3/contents/generations/tasks"))
		g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fake.Key()))
		g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "doubao-seedance-1-0-pro-250528",
			"content": []any{
				map[string]any{"type": "text", "text": "a lighthouse keeper wave"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://img.example/keeper.png"}, "role": "first_frame"},
			},
			"ratio": "adaptive", "duration": float64(5), "resolution": "720p", "watermark": false, "generate_audio": false}))

		fake.SetPlan(fakeupstream.ArkPlan{Polls: 1, FailCode: "InternalServiceError", FailMessage: "The service encountered an unexpected internal error."})
		failed := finalTask(t, acct.Key, "videos", body)
		g.Expect(failed.Status).To(Equal("failed"))
		g.Expect(failed.Error.Code).To(Equal("generation_failed"))
		g.Expect(failed.Error.Message).To(Equal("The service encountered an unexpected internal error."))
		g.Expect(failed.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 135850)

		fake.SetPlan(fakeupstream.ArkPlan{Polls: 1, FailCode: "OutputVideoSensitiveContentDetected", FailMessage: "The request failed because the output video may contain sensitive information."})
		failed = finalTask(t, acct.Key, "videos", body)
		g.Expect(failed.Status).To(Equal("failed"))
		g.Expect(failed.Error.Code).To(Equal("content_policy_violation"))
		g.Expect(failed.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 135850)
	})

	// TestArkSeedanceCancelOnDelete: deleting an unfinished task cancels it at
	// Ark (DELETE of the queued task) and refunds its reservation.
	It("cancels the upstream task when the GenerationTask is deleted", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewArk()
		t.Cleanup(fake.Close)
		model := vendorModel{prefix: "seedance-del", provider: "ark", baseURL: fake.URL + "/api/v3", upstream: "seedance-1-0-pro-250528", key: fake.Key(),
			typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond,
				PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		fake.SetPlan(fakeupstream.ArkPlan{Queued: 1000})
		code, raw := videoCall(t, http.MethodPost, "/v1/videos/generations", acct.Key, videoBody(model, 6))
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		var sub videoTask
		g.Expect(json.Unmarshal(raw, &sub)).To(Succeed())
		keyRemain(t, acct, 5*billing.QuotaPerUSD-150000) // 6 s at 0.05 USD reserved

		const tasksPath = "/api/v3/contents/generations/tasks/"
		var upstreamID string
		g.Eventually(func() string {
			for _, r := range fake.Requests() {
				if r.Method == http.MethodGet && strings.HasPrefix(r.Path, tasksPath) {
					upstreamID = strings.TrimPrefix(r.Path, tasksPath)
				}
			}
			return upstreamID
		}, 30*time.Second, 50*time.Millisecond).ShouldNot(BeEmpty(), "the controller polls the accepted task")
		g.Expect(fake.Status(upstreamID)).To(Equal("queued"))

		obj := &v1.GenerationTask{ObjectMeta: metav1.ObjectMeta{Name: tasks.ObjectName(sub.ID), Namespace: acct.Namespace}}
		g.Expect(stack.Client.Delete(context.Background(), obj)).To(Succeed())
		g.Eventually(func() string { return fake.Status(upstreamID) }, 30*time.Second, 50*time.Millisecond).Should(Equal("cancelled"))
		g.Expect(fake.Count(http.MethodDelete, tasksPath+upstreamID)).To(Equal(1))
		keyRemain(t, acct, 5*billing.QuotaPerUSD) // refunded
		ledgerUsed(t, acct, 0)
	})
})
