package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// assetHost serves tenant-chosen asset URLs and counts the fetches of each.
type assetHost struct {
	*httptest.Server
	mu      sync.Mutex
	files   map[string][]byte
	fetches map[string]int
}

func newAssetHost(t testing.TB, files map[string][]byte) *assetHost {
	h := &assetHost{files: files, fetches: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.fetches[r.URL.Path]++
		h.mu.Unlock()
		body, ok := h.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *assetHost) fetched(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches[path]
}

// reviewVideoModel declares a video model on the task API fake whose
// channel reviews assets with the simulated review service: 0.01 USD per
// output second and 0.10 USD per input video second.
func reviewVideoModel(t testing.TB, fake *fakeupstream.TaskAPI) string {
	input := v1.Decimal("0.10")
	return vendorModel{prefix: "reviewed", provider: "taskapi", baseURL: fake.URL, upstream: "up-video", key: fake.Key(),
		typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, review: true,
		options: map[string]string{"assetLibrary": "simulated", "reviewDelay": "0s"},
		price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond,
			UnitPrice: "0.01", InputUnitPrice: &input}}.declare(t)
}

var _ = Describe("Private asset review and policy refusals at submission", func() {
	// TestReviewForwardsCopiesAndBillsProbedDuration: under private asset
	// review the upstream receives signed links to the reviewed copies, never
	// the tenant's URLs; a reference video declared as 1 s but 6 s long is
	// billed for 6 s; videos declared within 15 s whose files total 16 s fail
	// with the totals message, refunded.
	It("forwards the reviewed copies upstream and bills reference videos by their probed duration", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewTaskAPI()
		t.Cleanup(fake.Close)
		model := reviewVideoModel(t, fake)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		clip := uploadstest.Movie("isom", 6, 256, false)
		long := uploadstest.Movie("isom", 8, 256, false)
		cat := uploadstest.PNG(32, 32)
		host := newAssetHost(t, map[string][]byte{"/clip.mp4": clip, "/long.mp4": long, "/cat.png": cat})

		body := fmt.Sprintf(`{"model":%q,"prompt":"the cat walks in","duration":5,"ratio":"16:9","private_asset_review":true,
			"reference_images":[%q],"video_with_roles":[{"url":%q,"role":"reference_video","duration":1}]}`,
			model, host.URL+"/cat.png", host.URL+"/clip.mp4")
		task := finalTask(t, acct.Key, "videos", body)
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)

		// The upstream received signed links to the reviewed copies")
		sent := fake.Requests()[0].JSON()
		videos := sent["video_with_roles"].([]any)
		videoURL := videos[0].(map[string]any)["url"].(string)
		imageURL := sent["reference_images"].([]any)[0].(string)
		for _, u := range []string{videoURL, imageURL} {
			g.Expect(u).NotTo(HavePrefix(host.URL), "the tenant's URL never reaches the upstream")
			g.Expect(u).To(HavePrefix(stack.BaseURL), "a link to the gateway's blob store")
		}
		for u, want := range map[string][]byte{videoURL: clip, imageURL: cat} {
			resp, err := http.Get(u)
			g.Expect(err).NotTo(HaveOccurred())
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(got).To(Equal(want), "the link serves the copy review checked")
		}
		g.Expect(host.fetched("/clip.mp4")).To(Equal(1), "fetched once, by the review copy")
		g.Expect(host.fetched("/cat.png")).To(Equal(1))

		// The reference video is billed for the 6 s read from the file, not the declared 1 s.
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.65"), "5 s out at 0.01 USD and 6 s in at 0.10 USD")
		ledgerUsed(t, acct, 325000)

		// The 15-second total is checked with the probed durations.
		body = fmt.Sprintf(`{"model":%q,"prompt":"two long clips","duration":5,"ratio":"16:9","private_asset_review":true,
			"reference_images":[%q],"video_with_roles":[{"url":%q,"role":"reference_video","duration":1},
			{"url":%q,"role":"reference_video","duration":1}]}`,
			model, host.URL+"/cat.png", host.URL+"/long.mp4", host.URL+"/long.mp4?second")
		task = finalTask(t, acct.Key, "videos", body)
		g.Expect(task.Status).To(Equal("failed"))
		g.Expect(task.Error.Message).To(ContainSubstring("video_with_roles durations must total at most 15 seconds (got 16 s, read from the files)"))
		g.Expect(task.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 325000)
		g.Expect(fake.Submissions()).To(Equal(1), "the refused task never reached the upstream")
	})

	// A reference image uploaded through POST /v1/uploads/images feeds a
	// reviewed submission: the review copies it from the gateway's own
	// store (the egress guard would refuse the gateway's address outside
	// tests), and the upstream receives the reviewed copy.
	It("reviews a reference image uploaded through the gateway", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewTaskAPI()
		t.Cleanup(fake.Close)
		model := reviewVideoModel(t, fake)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		cat := uploadstest.PNG(24, 24)
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		part, err := mw.CreateFormFile("file", "cat.png")
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = part.Write(cat)
		g.Expect(mw.Close()).To(Succeed())
		req, _ := http.NewRequest(http.MethodPost, stack.BaseURL+"/v1/uploads/images", &form)
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		var up struct {
			Data struct {
				URL string `json:"url"`
			} `json:"data"`
		}
		g.Expect(json.NewDecoder(resp.Body).Decode(&up)).To(Succeed())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

		task := finalTask(t, acct.Key, "videos", fmt.Sprintf(`{"model":%q,"prompt":"the cat walks in","duration":5,"ratio":"16:9",
			"private_asset_review":true,"reference_images":[%q]}`, model, up.Data.URL))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		sent := fake.Requests()[0].JSON()
		copyURL := sent["reference_images"].([]any)[0].(string)
		g.Expect(copyURL).NotTo(Equal(up.Data.URL), "the upstream gets the reviewed copy, not the upload")
		got, err := http.Get(copyURL)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(got.Body)
		got.Body.Close()
		g.Expect(body).To(Equal(cat))
	})

	// TestSubmissionPolicyRefusal: an upstream that refuses a submission for
	// policy reasons synchronously gives the client 422
	// content_policy_violation on both families, with nothing charged and no
	// billable usage row; the task is archived as failed. An accepted
	// submission still answers 200 with the queued task.
	It("answers a policy refusal at submission with 422 and charges nothing", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewTaskAPI()
		t.Cleanup(fake.Close)
		images := vendorModel{prefix: "policy-img", provider: "taskapi", baseURL: fake.URL, upstream: "up-image", key: fake.Key(),
			typ: v1.ModelTypeImage, profile: v1.ProfileMultiImage, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest,
				PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.04"}}.declare(t)
		videos := vendorModel{prefix: "policy-vid", provider: "taskapi", baseURL: fake.URL, upstream: "up-video", key: fake.Key(),
			typ: v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond,
				PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		ctx := context.Background()
		before, err := stack.Ledger.TokenUsage(ctx, acct.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())

		for _, c := range []struct{ family, body string }{
			{"images", fmt.Sprintf(`{"model":%q,"prompt":"something refused","size":"1:1"}`, images)},
			{"videos", videoBody(videos, 4)},
		} {
			fake.FailSubmits(fakeupstream.SubmitFailure{Status: http.StatusUnprocessableEntity, Message: "The prompt violates the usage policy."})
			code, raw := videoCall(t, http.MethodPost, "/v1/"+c.family+"/generations", acct.Key, c.body)
			g.Expect(code).To(Equal(http.StatusUnprocessableEntity), "%s: %s", c.family, raw)
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			g.Expect(json.Unmarshal(raw, &e)).To(Succeed())
			g.Expect(e.Error.Code).To(Equal(422))
			g.Expect(e.Error.Type).To(Equal("content_policy_violation"))
			g.Expect(e.Error.Message).To(ContainSubstring("The prompt violates the usage policy."))
		}

		after, err := stack.Ledger.TokenUsage(ctx, acct.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(after.Remain).To(Equal(before.Remain), "nothing is charged or held")
		g.Expect(after.Used).To(Equal(billing.Quota(0)))
		rows, err := stack.Ledger.ListUsage(ctx, store.UsageQuery{UserID: acct.Tenant.Status.UserID,
			Start: time.Now().Add(-time.Hour).Unix(), End: time.Now().Add(time.Hour).Unix()})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rows.Rows).To(BeEmpty(), "no usage row, not even a pre_consumed one")
		g.Eventually(func(g Gomega) {
			list := &v1.GenerationTaskList{}
			g.Expect(stack.Client.List(ctx, list, client.InNamespace(acct.Namespace))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2))
			for _, it := range list.Items {
				g.Expect(it.Status.Phase).To(Equal(v1.TaskFailed))
				g.Expect(it.Status.Error.Code).To(Equal("content_policy_violation"))
				g.Expect(it.Status.Billing.Status).To(Equal(v1.BillingRefunded))
				g.Expect(apimeta.IsStatusConditionTrue(it.Status.Conditions, v1.ConditionReady)).To(BeTrue(), "archived")
			}
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())

		// Accepted: answered as before (the queued task), then completed.
		code, raw := videoCall(t, http.MethodPost, "/v1/images/generations", acct.Key,
			fmt.Sprintf(`{"model":%q,"prompt":"a lamp","size":"1:1"}`, images))
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		g.Expect(strings.Contains(string(raw), `"status":"queued"`)).To(BeTrue(), "%s", raw)
		task := finalTask(t, acct.Key, "videos", videoBody(videos, 4))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
	})
})
