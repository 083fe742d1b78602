package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
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

// openAIVideoModel declares a video model served by an openai backend on
// the Videos API fake, priced 0.05 USD per output second.
func openAIVideoModel(t *testing.T, fake *fakeupstream.OpenAIVideos) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	model := uniqueModel("sora")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-" + model, Namespace: framework.SystemNamespace},
		StringData: map[string]string{"apiKey": fake.Key()}}
	g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim("openai", "openai")
	b.BaseURL, b.UpstreamModel = fake.URL+"/v1", "sora-2"
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeVideo, ValidationProfile: v1.ProfileAllInOneVideo,
			Backends: []v1.Backend{b}}}
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds,
			Unit: v1.UnitSecond, UnitPrice: "0.05"}}
	g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
	g.Expect(stack.Client.Create(ctx, price)).To(Succeed())
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), route)
		_ = stack.Client.Delete(context.Background(), price)
	})
	g.Expect(stack.WaitReady(ctx, route)).To(Succeed())
	g.Expect(stack.WaitReady(ctx, price)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, price)).To(Succeed())
	return model
}

func videoCall(t *testing.T, method, path, key, body string) (int, []byte) {
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

// finalVideoTask submits a video request and polls the task until it is
// final.
func finalVideoTask(t *testing.T, key, model string, duration int) videoTask {
	t.Helper()
	g := NewWithT(t)
	code, raw := videoCall(t, http.MethodPost, "/v1/videos/generations", key,
		fmt.Sprintf(`{"model":%q,"prompt":"a lighthouse at dusk","duration":%d,"ratio":"16:9"}`, model, duration))
	g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
	var task videoTask
	g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
	g.Expect(task.ID).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) string {
		code, raw := videoCall(t, http.MethodGet, "/v1/videos/generations/"+task.ID, key, "")
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		task = videoTask{}
		g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
		return task.Status
	}, 60*time.Second, 200*time.Millisecond).Should(BeElementOf("completed", "failed"))
	return task
}

// TestOpenAIVideos: a video task through the gateway on OpenAI's Videos
// API (the fake): submitted, polled through a 429, the MP4 downloaded into
// the blob store and served by the gateway, billed by the clip's length;
// a moderated video fails with content_policy_violation and is refunded.
func TestOpenAIVideos(t *testing.T) {
	g := NewWithT(t)
	fake := fakeupstream.NewOpenAIVideos()
	t.Cleanup(fake.Close)
	model := openAIVideoModel(t, fake)
	acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

	mp4 := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("sora frames for the e2e")...)
	fake.SetPlan(fakeupstream.VideoPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: mp4})
	task := finalVideoTask(t, acct.Key, model, 8)
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
	task = finalVideoTask(t, acct.Key, model, 4)
	g.Expect(task.Status).To(Equal("failed"))
	g.Expect(task.Error.Code).To(Equal("content_policy_violation"))
	g.Expect(task.Error.Message).To(Equal("Your request was blocked by our moderation system."))
	g.Expect(task.Billing.Status).To(Equal("refunded"))
	ledgerUsed(t, acct, 200000)
}
