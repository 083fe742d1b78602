package handlers_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/gif"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("image and video generation tasks", Ordered, func() {
	const tokenQuota = 5 * billing.QuotaPerUSD // 2 500 000
	var (
		multi, single, video string
		acct, other          *framework.Account
	)

	// mediaRoute declares a simulated media model in the system namespace
	// with its price, and waits until both are usable.
	mediaRouteTaking := func(delay time.Duration, prefix string, typ v1.ModelType, profile v1.ValidationProfile, price v1.PriceRuleSpec) string {
		model := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: typ, ValidationProfile: profile,
				Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Weight: 1, Groups: []v1.GroupName{"default"},
					Options: map[string]string{"delay": delay.String()}}}},
		}
		Expect(stack.Client.Create(ctx, route)).To(Succeed())
		DeferCleanup(func() { _ = stack.Client.Delete(ctx, route) })
		Expect(stack.WaitReady(ctx, route)).To(Succeed())
		price.Model = v1.ModelID(model)
		rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "price-", Namespace: framework.SystemNamespace}, Spec: price}
		Expect(stack.Client.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() { _ = stack.Client.Delete(ctx, rule) })
		Expect(stack.WaitReady(ctx, rule)).To(Succeed(), "published")
		Expect(stack.WaitCached(ctx, route)).To(Succeed())
		Expect(stack.WaitCached(ctx, rule)).To(Succeed())
		return model
	}
	mediaRoute := func(prefix string, typ v1.ModelType, profile v1.ValidationProfile, price v1.PriceRuleSpec) string {
		return mediaRouteTaking(400*time.Millisecond, prefix, typ, profile, price)
	}

	newAcct := func() *framework.Account {
		a, err := stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To(int64(tokenQuota))})
		Expect(err).NotTo(HaveOccurred())
		return a
	}

	remain := func(a *framework.Account) int64 {
		b, err := stack.Ledger.TokenUsage(ctx, a.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		return int64(b.Remain)
	}

	// await polls a task until it reaches a final status.
	await := func(a *framework.Account, family, id string) map[string]any {
		var body map[string]any
		Eventually(func(g Gomega) {
			code, b, _ := call("GET", "/v1/"+family+"/generations/"+id, bearer(a.Key), nil)
			g.Expect(code).To(Equal(200))
			g.Expect(b["status"]).To(BeElementOf("completed", "failed"))
			body = b
		}, framework.Timeout, framework.Interval).Should(Succeed())
		return body
	}

	fetch := func(url string) (string, []byte) {
		resp, err := http.Get(url)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(200))
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.Header.Get("Content-Type"), raw
	}

	usageRows := func(a *framework.Account) []map[string]any {
		s := &corev1.Secret{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Tenant.Status.AccessTokenSecretName}, s)).To(Succeed())
		h := map[string]string{
			"Authorization": "Bearer " + string(s.Data[v1.AccessTokenSecretKey]),
			"X-User-Id":     strconv.FormatInt(a.Tenant.Status.UserID, 10),
		}
		now := time.Now().Unix()
		code, body, _ := call("GET", fmt.Sprintf("/api/usage/tokens/requests?start_timestamp=%d&end_timestamp=%d", now-3600, now+3600), h, nil)
		Expect(code).To(Equal(200), "%v", body)
		var out []map[string]any
		for _, d := range body["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		return out
	}

	BeforeAll(func() {
		multi = mediaRoute("multi", v1.ModelTypeImage, v1.ProfileMultiImage,
			v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.04"})
		single = mediaRoute("single", v1.ModelTypeImage, v1.ProfileSingleImage,
			v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest,
				UnitPrice: "0.03", InputImageUnitPrice: credits("0.003")})
		video = mediaRoute("video", v1.ModelTypeVideo, v1.ProfileAllInOneVideo,
			v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"})
		acct, other = newAcct(), newAcct()
	})

	It("dates a task's usage row at billing, not at acceptance", func() {
		slow := mediaRouteTaking(2500*time.Millisecond, "slow", v1.ModelTypeImage, v1.ProfileSingleImage,
			v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.03"})
		a := newAcct()
		code, sub, _ := call("POST", "/v1/images/generations", bearer(a.Key), map[string]any{"model": slow, "prompt": "a slow boat"})
		Expect(code).To(Equal(200), "%v", sub)
		unix := func(v any) int64 { n, err := v.(json.Number).Int64(); Expect(err).NotTo(HaveOccurred()); return n }
		accepted := unix(sub["created_at"])
		done := await(a, "images", sub["id"].(string))
		Expect(done["status"]).To(Equal("completed"))
		completed := unix(done["completed_at"])
		Expect(completed).To(BeNumerically(">", accepted), "the route takes 2.5 s")
		rows := usageRows(a)
		Expect(rows).To(HaveLen(1))
		Expect(unix(rows[0]["created_at"])).To(BeNumerically(">=", completed-1), "billed when settled, at %d; accepted at %d", completed, accepted)
	})

	It("runs a multi-image task: pre-deducts n, settles the outputs, serves real PNGs, records usage with task_id", func() {
		code, sub, _ := call("POST", "/v1/images/generations", bearer(acct.Key),
			map[string]any{"model": multi, "prompt": "three cats", "n": 3, "size": "16:9"})
		Expect(code).To(Equal(200), "%v", sub)
		Expect(sub["object"]).To(Equal("generation.task"))
		Expect(sub["status"]).To(Equal("queued"))
		Expect(num(sub["progress"])).To(Equal("0"))
		Expect(sub["metadata"]).To(Equal(map[string]any{}))
		Expect(sub["model"]).To(Equal(multi))
		Expect(sub).To(HaveKey("created_at"))
		Expect(sub).NotTo(HaveKey("result"))
		id := sub["id"].(string)
		Expect(id).To(HavePrefix("task_"))
		By("3 × 0.04 USD = 60 000 quota reserved at submission")
		Expect(remain(acct)).To(Equal(int64(tokenQuota - 60000)))

		done := await(acct, "images", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(num(done["progress"])).To(Equal("100"))
		Expect(done).To(HaveKey("completed_at"))
		Expect(num(done["expires_at"])).To(Equal(strconv.FormatInt(mustInt(done["completed_at"])+86400, 10)))
		Expect(done).NotTo(HaveKey("error"))
		Expect(done).NotTo(HaveKey("usage")) // per-request price: no token usage to report
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "24", "cost_usd": "0.12"}))
		result := done["result"].(map[string]any)
		Expect(result["type"]).To(Equal("image"))
		data := result["data"].([]any)
		Expect(data).To(HaveLen(3))
		Expect(done["url"]).To(Equal(data[0].(map[string]any)["url"]))
		for _, d := range data {
			ctype, raw := fetch(d.(map[string]any)["url"].(string))
			Expect(ctype).To(Equal("image/png"))
			cfg, err := png.DecodeConfig(bytes.NewReader(raw))
			Expect(err).NotTo(HaveOccurred())
			Expect(cfg.Width).To(Equal(64))
			Expect(cfg.Height).To(Equal(36))
		}
		Expect(remain(acct)).To(Equal(int64(tokenQuota - 60000)))

		rows := usageRows(acct)
		Expect(rows).To(ContainElement(And(HaveKeyWithValue("task_id", id), HaveKeyWithValue("model_name", multi),
			HaveKeyWithValue("billing_phase", "settled"), HaveKeyWithValue("quota", json.Number("60000")))))
	})

	It("keeps tasks to their tenant: another key gets 404 task_not_found in the common shape", func() {
		code, sub, _ := call("POST", "/v1/images/generations", bearer(acct.Key), map[string]any{"model": single, "prompt": "a fox"})
		Expect(code).To(Equal(200), "%v", sub)
		id := sub["id"].(string)
		code, body, _ := call("GET", "/v1/images/generations/"+id, bearer(other.Key), nil)
		Expect(code).To(Equal(404))
		Expect(body["error"]).To(Equal(map[string]any{"code": json.Number("404"), "type": "task_not_found",
			"message": fmt.Sprintf("task %q not found", id)}))
		By("an image task is not a video task; the video family answers with the common gateway errors")
		code, body, _ = call("GET", "/v1/videos/generations/"+id, bearer(acct.Key), nil)
		Expect(code).To(Equal(404))
		Expect(body["error"]).To(Equal(map[string]any{"code": json.Number("404"), "type": "not_found_error",
			"message": fmt.Sprintf("task %q not found", id)}))
		code, body, _ = call("GET", "/v1/videos/generations/"+id, nil, nil)
		Expect(code).To(Equal(401))
		Expect(body["error"].(map[string]any)["type"]).To(Equal("authentication_error"))
		By("no key: 401 unauthorized")
		code, body, _ = call("GET", "/v1/images/generations/"+id, nil, nil)
		Expect(code).To(Equal(401))
		Expect(body["error"].(map[string]any)["type"]).To(Equal("unauthorized"))
		await(acct, "images", id)
	})

	It("bills a single-image task with its reference image, and replays a client_business_id without charging twice", func() {
		before := remain(acct)
		req := map[string]any{"model": single, "prompt": "a boat", "client_business_id": "order-42",
			"image_urls": []string{"https://example.com/ref.png"}}
		code, first, _ := call("POST", "/v1/images/generations", bearer(acct.Key), req)
		Expect(code).To(Equal(200), "%v", first)
		code, again, _ := call("POST", "/v1/images/generations", bearer(acct.Key), req)
		Expect(code).To(Equal(200), "%v", again)
		Expect(again["id"]).To(Equal(first["id"]))
		done := await(acct, "images", "order-42") // queried by the business identifier
		Expect(done["id"]).To(Equal(first["id"]))
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "6.6", "cost_usd": "0.033"}))
		code, again, _ = call("POST", "/v1/images/generations", bearer(acct.Key), req)
		Expect(code).To(Equal(200))
		Expect(again["id"]).To(Equal(first["id"]))
		Expect(again["status"]).To(Equal("completed"))
		Expect(remain(acct)).To(Equal(before - 16500)) // 0.033 USD once
		By("the same identifier in another tenant is another task")
		code, theirs, _ := call("POST", "/v1/images/generations", bearer(other.Key), req)
		Expect(code).To(Equal(200))
		Expect(theirs["id"]).NotTo(Equal(first["id"]))
		await(other, "images", theirs["id"].(string))
		By("the same identifier on the video family is another task")
		code, vid, _ := call("POST", "/v1/videos/generations", bearer(acct.Key),
			map[string]any{"model": video, "prompt": "a boat", "duration": 2, "client_business_id": "order-42"})
		Expect(code).To(Equal(200), "%v", vid)
		Expect(vid["id"]).NotTo(Equal(first["id"]))
		await(acct, "videos", "order-42")
	})

	It("answers concurrent repeats of one client_business_id with one task and one charge", func() {
		before := remain(acct)
		req := map[string]any{"model": video, "prompt": "rain", "duration": 2, "client_business_id": "burst-1"}
		ids := make(chan string, 6)
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), req)
				Expect(code).To(Equal(200), "%v", sub)
				ids <- sub["id"].(string)
			}()
		}
		wg.Wait()
		close(ids)
		var first string
		for id := range ids {
			if first == "" {
				first = id
			}
			Expect(id).To(Equal(first))
		}
		done := await(acct, "videos", first)
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "20", "cost_usd": "0.1"}))
		Expect(remain(acct)).To(Equal(before - 50000)) // 2 s × 0.05 USD, once
	})

	It("rejects invalid bodies with the contract's errors", func() {
		cases := []struct {
			path string
			body map[string]any
			msg  string
		}{
			{"/v1/images/generations", map[string]any{"model": single, "prompt": "x", "n": 2}, "n must be 1"},
			{"/v1/videos/generations", map[string]any{"model": video, "prompt": "x", "ratio": "16:9", "aspect_ratio": "16:9"}, "aspect_ratio"},
			{"/v1/videos/generations", map[string]any{"model": video, "prompt": "x",
				"image_with_roles": []map[string]any{{"url": "https://example.com/a.png", "role": "first_frame"}},
				"reference_images": []string{"https://example.com/b.png"}}, media.MixedFramesMessage},
			{"/v1/images/generations", map[string]any{"model": video, "prompt": "x"}, "is a video model"},
		}
		for _, c := range cases {
			code, body, _ := call("POST", c.path, bearer(acct.Key), c.body)
			Expect(code).To(Equal(400), "%v", c.body)
			e := body["error"].(map[string]any)
			want := "invalid_request" // the image task error table
			if strings.HasPrefix(c.path, "/v1/videos") {
				want = "invalid_request_error" // the common gateway errors
			}
			Expect(e["type"]).To(Equal(want))
			Expect(num(e["code"])).To(Equal("400"))
			Expect(e["message"]).To(ContainSubstring(c.msg))
		}
		code, body, _ := call("POST", "/v1/images/generations", bearer(acct.Key), map[string]any{"model": "no-such-model", "prompt": "x"})
		Expect(code).To(Equal(404), "%v", body)
	})

	It("uses the default image model of the tenant, else the platform's, when a request names none", func() {
		a := newAcct()
		By("without a default: 400 model is required")
		code, body, _ := call("POST", "/v1/images/generations", bearer(a.Key), map[string]any{"prompt": "cat"})
		Expect(code).To(Equal(400), "%v", body)
		Expect(body["error"].(map[string]any)["message"]).To(ContainSubstring("model is required"))

		By("the tenant declares its own default image route")
		model := fmt.Sprintf("tenant-default-%d", time.Now().UnixNano())
		route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: a.Namespace},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileSingleImage,
				DefaultModel: true, Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Groups: []v1.GroupName{"default"},
					Options: map[string]string{"delay": "100ms"}}}}}
		Expect(stack.Client.Create(ctx, route)).To(Succeed())
		rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: a.Namespace},
			Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
				Unit: v1.UnitRequest, UnitPrice: "0.02"}}
		Expect(stack.Client.Create(ctx, rule)).To(Succeed())
		Expect(stack.WaitReady(ctx, route)).To(Succeed())
		Expect(stack.WaitReady(ctx, rule)).To(Succeed())
		Expect(stack.WaitCached(ctx, route)).To(Succeed())
		Expect(stack.WaitCached(ctx, rule)).To(Succeed())

		for _, req := range []map[string]any{{"prompt": "cat"}, {"prompt": "cat", "model": nil}} {
			code, sub, _ := call("POST", "/v1/images/generations", bearer(a.Key), req)
			Expect(code).To(Equal(200), "%v", sub)
			Expect(sub["model"]).To(Equal(model))
			done := await(a, "images", sub["id"].(string))
			Expect(done["status"]).To(Equal("completed"), "%v", done)
			Expect(done["model"]).To(Equal(model))
		}
		By("0.02 USD per image, billed to the default model")
		Expect(remain(a)).To(Equal(int64(tokenQuota - 2*10000)))

		By("an empty model string is still a missing model, not a request for the default")
		code, body, _ = call("POST", "/v1/images/generations", bearer(a.Key), map[string]any{"prompt": "cat", "model": ""})
		Expect(code).To(Equal(400), "%v", body)
		By("another tenant does not see this tenant's default")
		code, _, _ = call("POST", "/v1/images/generations", bearer(other.Key), map[string]any{"prompt": "cat"})
		Expect(code).To(Equal(400))
		By("videos have defaults of their own")
		code, _, _ = call("POST", "/v1/videos/generations", bearer(a.Key), map[string]any{"prompt": "cat"})
		Expect(code).To(Equal(400))
	})

	It("refuses a submission the balance cannot cover with 402 insufficient_quota", func() {
		poor, err := stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1")}}},
			v1.ApiTokenSpec{Quota: ptr.To[int64](10000)})
		Expect(err).NotTo(HaveOccurred())
		code, body, _ := call("POST", "/v1/images/generations", bearer(poor.Key), map[string]any{"model": multi, "prompt": "x", "n": 2})
		Expect(code).To(Equal(402), "%v", body)
		Expect(body["error"].(map[string]any)["type"]).To(Equal("insufficient_quota"))
		list := &v1.GenerationTaskList{}
		Expect(stack.Client.List(ctx, list, client.InNamespace(poor.Namespace))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("holds a key to its own requests-per-minute, as text does: 429 with Retry-After, no task, no charge", func() {
		limited, err := stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To(int64(tokenQuota)), RequestsPerMinute: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(stack.WaitCached(ctx, limited.Token)).To(Succeed())
		for range 2 {
			code, body, _ := call("POST", "/v1/images/generations", bearer(limited.Key), map[string]any{"model": multi, "prompt": "x"})
			Expect(code).To(Equal(200), "%v", body)
		}
		before := remain(limited)
		code, body, hdr := call("POST", "/v1/images/generations", bearer(limited.Key), map[string]any{"model": multi, "prompt": "x"})
		Expect(code).To(Equal(429), "%v", body)
		e := body["error"].(map[string]any)
		Expect(e["type"]).To(Equal("rate_limit_exceeded"), "the image family's own table (docs/api-choices.md)")
		Expect(e["message"]).To(ContainSubstring("the key's requests-per-minute"))
		Expect(hdr.Get("Retry-After")).NotTo(BeEmpty())
		Expect(remain(limited)).To(Equal(before), "a refused submission charges nothing")
		list := &v1.GenerationTaskList{}
		Expect(stack.Client.List(ctx, list, client.InNamespace(limited.Namespace))).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
	})

	It("fails a task on the failure directive: error generation_failed, billing refunded, balance restored exactly", func() {
		before := remain(acct)
		code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": video, "prompt": "[sim:fail] a storm", "duration": 6})
		Expect(code).To(Equal(200), "%v", sub)
		Expect(remain(acct)).To(Equal(before - 150000)) // 6 s × 0.05 USD
		done := await(acct, "videos", sub["id"].(string))
		Expect(done["status"]).To(Equal("failed"))
		Expect(num(done["progress"])).To(Equal("0"))
		Expect(done["error"].(map[string]any)["code"]).To(Equal("generation_failed"))
		Expect(done["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
		for _, k := range []string{"result", "completed_at", "expires_at", "url"} {
			Expect(done).NotTo(HaveKey(k))
		}
		Expect(remain(acct)).To(Equal(before))
	})

	It("lists a running task's held reservation as pre_consumed, then the settled charge in its place", func() {
		code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key),
			map[string]any{"model": video, "prompt": "slow waves [sim:delay=3s]", "duration": 4})
		Expect(code).To(Equal(200), "%v", sub)
		id := sub["id"].(string)
		rowOf := func(g Gomega) map[string]any {
			for _, r := range usageRows(acct) {
				if r["task_id"] == id {
					return r
				}
			}
			return nil
		}
		var held map[string]any
		Eventually(func(g Gomega) {
			held = rowOf(g)
			g.Expect(held).NotTo(BeNil())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(held).To(And(HaveKeyWithValue("billing_phase", "pre_consumed"), HaveKeyWithValue("quota", json.Number("100000")),
			HaveKeyWithValue("cost_usd", "0.2"), HaveKeyWithValue("model_name", video)))
		Expect(await(acct, "videos", id)["status"]).To(Equal("completed"))
		settled := rowOf(Default)
		Expect(settled).To(And(HaveKeyWithValue("billing_phase", "settled"), HaveKeyWithValue("quota", json.Number("100000")),
			HaveKeyWithValue("log_id", held["log_id"])))

		By("a failed task's reservation leaves the list with its refund")
		code, sub, _ = call("POST", "/v1/videos/generations", bearer(acct.Key),
			map[string]any{"model": video, "prompt": "doomed [sim:fail] [sim:delay=1s]", "duration": 2})
		Expect(code).To(Equal(200), "%v", sub)
		id = sub["id"].(string)
		Expect(await(acct, "videos", id)["status"]).To(Equal("failed"))
		Expect(rowOf(Default)).To(BeNil())
	})

	It("runs a video task with a model-decided duration: reserves 30 s, settles the 5 s produced, serves the animation", func() {
		before := remain(acct)
		code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key),
			map[string]any{"model": video, "prompt": "waves [sim:delay=1s]", "duration": -1, "aspect_ratio": "16:9", "client_business_id": "clip-1"})
		Expect(code).To(Equal(200), "%v", sub)
		Expect(remain(acct)).To(Equal(before - 750000)) // 30 s × 0.05 USD
		id := sub["id"].(string)
		done := await(acct, "videos", "clip-1")
		Expect(done["id"]).To(Equal(id))
		Expect(done["status"]).To(Equal("completed"))
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "50", "cost_usd": "0.25"}))
		Expect(remain(acct)).To(Equal(before - 125000))
		result := done["result"].(map[string]any)
		Expect(result["type"]).To(Equal("video"))
		ctype, raw := fetch(result["data"].([]any)[0].(map[string]any)["url"].(string))
		Expect(ctype).To(Equal("image/gif"))
		anim, err := gif.DecodeAll(bytes.NewReader(raw))
		Expect(err).NotTo(HaveOccurred())
		Expect(anim.Image).To(HaveLen(8))

		By("the ledger archive answers after the object is deleted (retention)")
		task := &v1.GenerationTask{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: tasks.ObjectName(id)}, task)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(task), task)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(task.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(stack.Client.Delete(ctx, task)).To(Succeed())
		Eventually(func(g Gomega) {
			list := &v1.GenerationTaskList{}
			g.Expect(stack.Client.List(ctx, list, client.InNamespace(acct.Namespace))).To(Succeed())
			for _, t := range list.Items {
				g.Expect(t.Spec.TaskID).NotTo(Equal(id))
			}
		}, framework.Timeout, framework.Interval).Should(Succeed())
		for _, q := range []string{id, "clip-1"} {
			code, archived, _ := call("GET", "/v1/videos/generations/"+q, bearer(acct.Key), nil)
			Expect(code).To(Equal(200))
			Expect(archived["id"]).To(Equal(id))
			Expect(archived["status"]).To(Equal("completed"))
			Expect(archived["billing"]).To(Equal(done["billing"]))
			ctype, _ := fetch(archived["result"].(map[string]any)["data"].([]any)[0].(map[string]any)["url"].(string))
			Expect(ctype).To(Equal("image/gif"))
		}
		By("a replay after deletion still returns the task without a new charge")
		code, again, _ := call("POST", "/v1/videos/generations", bearer(acct.Key),
			map[string]any{"model": video, "prompt": "waves", "client_business_id": "clip-1"})
		Expect(code).To(Equal(200))
		Expect(again["id"]).To(Equal(id))
		Expect(remain(acct)).To(Equal(before - 125000))
	})

	// reviewedVideoRoute is a video route at 0.05 USD per second with private
	// asset review switched on and decided at once.
	reviewedVideoRoute := func(name string) string {
		reviewed := mediaRoute(name, v1.ModelTypeVideo, v1.ProfileAllInOneVideo,
			v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"})
		route := &v1.ModelRoute{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: framework.SystemNamespace, Name: reviewed}, route)).To(Succeed())
		route.Spec.PrivateAssetReview = true
		route.Spec.Backends[0].Options["reviewDelay"] = "0s"
		Expect(stack.Client.Update(ctx, route)).To(Succeed())
		return reviewed
	}

	It("reviews private assets before generating, and fails a rejected one without a fee", func() {
		reviewed := reviewedVideoRoute("reviewed")
		before := remain(acct)
		submitVideo := func(ref string) string {
			var id string
			Eventually(func(g Gomega) { // until the gateway's cache has the switch on
				code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": reviewed,
					"prompt": "the reference, animated", "duration": 2, "private_asset_review": true, "reference_images": []string{ref}})
				g.Expect(code).To(Equal(200), "%v", sub)
				id = sub["id"].(string)
			}, framework.Timeout, framework.Interval).Should(Succeed())
			return id
		}
		ok := submitVideo(cdn + "/cat.png")
		bad := submitVideo(cdn + "/reject.png")
		done := await(acct, "videos", ok)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		failed := await(acct, "videos", bad)
		Expect(failed["status"]).To(Equal("failed"))
		Expect(failed["error"].(map[string]any)["message"]).To(ContainSubstring("private asset review rejected"))
		Expect(failed["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
		task := &v1.GenerationTask{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: tasks.ObjectName(ok)}, task)).To(Succeed())
		Expect(task.Status.ReviewRounds).To(HaveLen(1))
		Expect(task.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
		Expect(task.Status.ReviewRounds[0].Assets).To(HaveLen(1))
		reviewedCopy := task.Status.ReviewRounds[0].Assets[0]
		Expect(reviewedCopy.Copy).To(HavePrefix("tenants/"+acct.Namespace+"/review-assets/"), "the upstream gets the reviewed copy")
		reviewedCopy.Copy = ""
		Expect(reviewedCopy).To(Equal(v1.ReviewAsset{URL: cdn + "/cat.png", Type: "image", Role: "reference_image", State: "passed"}))
		Expect(remain(acct)).To(Equal(before - 50000)) // only the passed one: 2 s × 0.05 USD
	})

	It("delivers a signed task webhook with data.billing to the tenant's receiver", func() {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		events := make(chan http.Header, 4)
		bodies := make(chan []byte, 4)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			events <- r.Header.Clone()
			bodies <- b
			w.WriteHeader(http.StatusOK)
		}))
		DeferCleanup(receiver.Close)
		hooked := newAcct()
		Expect(stack.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: hooked.Namespace},
			StringData: map[string]string{"secret": secret}})).To(Succeed())
		Eventually(func() error {
			t := &v1.Tenant{}
			if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(hooked.Tenant), t); err != nil {
				return err
			}
			t.Spec.Webhook = &v1.WebhookSpec{URL: receiver.URL + "/tasks", SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}
			return stack.Client.Update(ctx, t)
		}, framework.Timeout, framework.Interval).Should(Succeed())

		code, sub, _ := call("POST", "/v1/images/generations", bearer(hooked.Key), map[string]any{"model": multi, "prompt": "hooked", "n": 2})
		Expect(code).To(Equal(200), "%v", sub)
		done := await(hooked, "images", sub["id"].(string))
		var header http.Header
		Eventually(events, framework.Timeout).Should(Receive(&header))
		body := <-bodies
		wh, err := standardwebhooks.NewWebhook(secret)
		Expect(err).NotTo(HaveOccurred())
		Expect(wh.Verify(body, header)).To(Succeed(), "verifies with the Standard Webhooks reference library")
		var ev map[string]any
		Expect(json.Unmarshal(body, &ev)).To(Succeed())
		Expect(ev["type"]).To(Equal("task.completed"))
		Expect(ev["id"]).To(Equal(header.Get("webhook-id")))
		data := ev["data"].(map[string]any)
		Expect(data["id"]).To(Equal(sub["id"]))
		Expect(data["billing"]).To(Equal(done["billing"]), "data.billing is the task query's billing object")
		Expect(data["billing"].(map[string]any)["status"]).To(Equal("settled"))
		task := &v1.GenerationTask{}
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: hooked.Namespace, Name: tasks.ObjectName(sub["id"].(string))}, task)).To(Succeed())
			g.Expect(task.Status.Webhook).NotTo(BeNil())
			g.Expect(task.Status.Webhook.State).To(Equal(v1.WebhookDelivered))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Consistently(events, time.Second).ShouldNot(Receive(), "delivered once")
	})

	// reviewedUpstreamVideoRoute is a video route with private asset review
	// on, served by a task API upstream (another gateway speaking the
	// contract) whose channel has the simulated asset library, decided at
	// once, priced by prices.
	reviewedUpstreamVideoRoute := func(up *fakeupstream.TaskAPI, prices ...v1.PriceRuleSpec) string {
		model := fmt.Sprintf("upstream-video-%d", time.Now().UnixNano())
		cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: model + "-key", Namespace: framework.SystemNamespace},
			StringData: map[string]string{"key": up.Key()}}
		Expect(stack.Client.Create(ctx, cred)).To(Succeed())
		DeferCleanup(func() { _ = stack.Client.Delete(ctx, cred) })
		route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeVideo, ValidationProfile: v1.ProfileAllInOneVideo,
				PrivateAssetReview: true,
				Backends: []v1.Backend{{Name: "agg", Provider: "taskapi", BaseURL: up.URL, UpstreamModel: "their-video-model",
					CredentialSecretRef: &v1.SecretKeyRef{Name: cred.Name, Key: "key"}, Weight: 1, Groups: []v1.GroupName{"default"},
					Options: map[string]string{"assetLibrary": "simulated", "reviewDelay": "0s"}}}}}
		Expect(stack.Client.Create(ctx, route)).To(Succeed())
		DeferCleanup(func() { _ = stack.Client.Delete(ctx, route) })
		Expect(stack.WaitReady(ctx, route)).To(Succeed())
		for _, price := range prices {
			price.Model = v1.ModelID(model)
			rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "price-", Namespace: framework.SystemNamespace}, Spec: price}
			Expect(stack.Client.Create(ctx, rule)).To(Succeed())
			DeferCleanup(func() { _ = stack.Client.Delete(ctx, rule) })
		}
		return model
	}

	// taskObject reads a task's GenerationTask.
	taskObject := func(a *framework.Account, id string) *v1.GenerationTask {
		task := &v1.GenerationTask{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: tasks.ObjectName(id)}, task)).To(Succeed())
		return task
	}

	// submitted posts a video request until the gateway's cache has its
	// route and price, and returns the task ID.
	submitted := func(a *framework.Account, body map[string]any) string {
		var id string
		Eventually(func(g Gomega) {
			code, sub, _ := call("POST", "/v1/videos/generations", bearer(a.Key), body)
			g.Expect(code).To(Equal(200), "%v", sub)
			id = sub["id"].(string)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		return id
	}

	// refused posts a video request that must be refused with 400 in the
	// video family's error shape, and returns the message.
	refused := func(a *framework.Account, body map[string]any) string {
		code, resp, _ := call("POST", "/v1/videos/generations", bearer(a.Key), body)
		Expect(code).To(Equal(400), "%v", resp)
		e := resp["error"].(map[string]any)
		Expect(e["type"]).To(Equal("invalid_request_error"))
		Expect(num(e["code"])).To(Equal("400"))
		return e["message"].(string)
	}

	It("runs a reviewed video task on an asynchronous upstream, forwarding the inline image as a signed link", func() {
		up := fakeupstream.NewTaskAPI()
		DeferCleanup(up.Close)
		up.SetPlan(fakeupstream.TaskPlan{Polls: 1})
		model := reviewedUpstreamVideoRoute(up, v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds,
			Unit: v1.UnitSecond, UnitPrice: "0.05"})

		frame := uploadstest.PNG(40, 30)
		before := remain(acct)
		var id string
		Eventually(func(g Gomega) { // until the gateway's cache has the route and its price
			code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": model,
				"private_asset_review": true, "duration": 4, "prompt": "the frame, moving",
				"image_with_roles": []map[string]any{{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(frame), "role": "first_frame"}}})
			g.Expect(code).To(Equal(200), "%v", sub)
			id = sub["id"].(string)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "40", "cost_usd": "0.2"}))
		Expect(remain(acct)).To(Equal(before - 100000)) // 4 s × 0.05 USD

		By("the result is served by the gateway with the upstream's bytes")
		want, _ := fakeupstream.DefaultOutput("video", 0)
		_, got := fetch(done["url"].(string))
		Expect(got).To(Equal(want))

		By("the upstream got the backend's model and a signed gateway link to the stored frame")
		reqs := up.Requests()
		Expect(up.Submissions()).To(Equal(1))
		var sent struct {
			Model          string
			ImageWithRoles []struct{ URL, Role string } `json:"image_with_roles"`
		}
		Expect(json.Unmarshal(reqs[0].Body, &sent)).To(Succeed())
		Expect(sent.Model).To(Equal("their-video-model"))
		Expect(sent.ImageWithRoles).To(HaveLen(1))
		Expect(sent.ImageWithRoles[0].URL).To(HavePrefix(stack.BaseURL + "/files/"))
		_, served := fetch(sent.ImageWithRoles[0].URL)
		Expect(served).To(Equal(frame))
	})

	It("fails a task an upstream refuses for policy reasons with content_policy_violation, without a fee", func() {
		up := fakeupstream.NewTaskAPI()
		DeferCleanup(up.Close)
		model := reviewedUpstreamVideoRoute(up, v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds,
			Unit: v1.UnitSecond, UnitPrice: "0.05"})
		body := map[string]any{"model": model, "duration": 2, "prompt": "something the upstream will not draw"}
		before := remain(acct)
		for _, c := range []struct {
			name    string
			setup   func()
			code    string
			message string
		}{
			{"a 422 refusal of the submission", func() {
				up.FailSubmits(fakeupstream.SubmitFailure{Status: 422, Message: "the prompt violates the content policy"})
			}, "content_policy_violation", "the upstream rejected the request: the prompt violates the content policy"},
			{"a policy failure after the upstream accepted the task", func() {
				up.SetPlan(fakeupstream.TaskPlan{Polls: 1, Fail: "the output was blocked by moderation", FailCode: "content_policy_violation"})
			}, "content_policy_violation", "the output was blocked by moderation"},
			{"any other failure", func() {
				up.SetPlan(fakeupstream.TaskPlan{Polls: 1, Fail: "the renderer crashed"})
			}, "generation_failed", "the renderer crashed"},
		} {
			By(c.name)
			c.setup()
			// A refusal at submission may answer the POST itself (422,
			// when it comes within the gateway's submit wait); otherwise
			// the task fails with it.
			var code int
			var sub map[string]any
			Eventually(func(g Gomega) { // until the gateway's cache has the route's price
				code, sub, _ = call("POST", "/v1/videos/generations", bearer(acct.Key), body)
				g.Expect(code).NotTo(Equal(http.StatusNotFound), "%v", sub)
			}, framework.Timeout, framework.Interval).Should(Succeed())
			if code == http.StatusUnprocessableEntity {
				Expect(c.code).To(Equal("content_policy_violation"), "%v", sub)
				Expect(sub["error"].(map[string]any)["message"]).To(ContainSubstring("content policy"))
				Expect(remain(acct)).To(Equal(before))
				continue
			}
			Expect(code).To(Equal(200), "%v", sub)
			failed := await(acct, "videos", sub["id"].(string))
			Expect(failed["status"]).To(Equal("failed"))
			Expect(failed["error"]).To(Equal(map[string]any{"code": c.code, "message": c.message}))
			Expect(failed["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
			Expect(remain(acct)).To(Equal(before))
		}
	})

	It("reviews and forwards video_with_roles, and bills the request at the price with video input", func() {
		up := fakeupstream.NewTaskAPI()
		DeferCleanup(up.Close)
		up.SetPlan(fakeupstream.TaskPlan{Polls: 1})
		perSecond := func(usd v1.Decimal, videoInput bool) v1.PriceRuleSpec {
			return v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond,
				UnitPrice: usd, Conditions: &v1.PriceConditions{HasVideoInput: ptr.To(videoInput)}}
		}
		model := reviewedUpstreamVideoRoute(up, perSecond("0.05", false), perSecond("0.08", true))
		body := map[string]any{"model": model, "private_asset_review": true, "duration": 2,
			"prompt":           "image 1 moving like video 1",
			"reference_images": []string{cdn + "/still.png"},
			"video_with_roles": []map[string]any{{"url": cdn + "/clip.mp4", "role": "reference_video"}}}
		before := remain(acct)
		id := submitted(acct, body)
		By("2 s at 0.08 USD, the price with video input, are reserved")
		Expect(remain(acct)).To(Equal(before - 80000))
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "32", "cost_usd": "0.16"}))
		Expect(remain(acct)).To(Equal(before - 80000))

		By("the video was reviewed with the image, as a reference video")
		task := taskObject(acct, id)
		Expect(task.Status.ReviewRounds).To(HaveLen(1))
		Expect(task.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
		assets := append([]v1.ReviewAsset(nil), task.Status.ReviewRounds[0].Assets...)
		for i := range assets {
			Expect(assets[i].Copy).To(ContainSubstring("/review-assets/"), "each asset has its reviewed copy")
			assets[i].Copy, assets[i].DurationMillis = "", 0
		}
		Expect(assets).To(Equal([]v1.ReviewAsset{
			{URL: cdn + "/still.png", Type: "image", Role: "reference_image", State: "passed"},
			{URL: cdn + "/clip.mp4", Type: "video", Role: "reference_video", State: "passed"},
		}))

		By("and the upstream got it")
		Expect(up.Submissions()).To(Equal(1))
		var sent struct {
			ReferenceImages []string                     `json:"reference_images"`
			VideoWithRoles  []struct{ URL, Role string } `json:"video_with_roles"`
			VideoList       []any                        `json:"video_list"`
		}
		Expect(json.Unmarshal(up.Requests()[0].Body, &sent)).To(Succeed())
		// The reviewed copies, as signed links, not the tenant's URLs.
		Expect(sent.ReferenceImages).To(HaveLen(1))
		Expect(sent.ReferenceImages[0]).To(ContainSubstring("review-assets"))
		Expect(sent.VideoWithRoles).To(HaveLen(1))
		Expect(sent.VideoWithRoles[0].URL).To(ContainSubstring("review-assets"))
		Expect(sent.VideoWithRoles[0].Role).To(Equal("reference_video"))
		Expect(sent.VideoList).To(BeEmpty(), "video_list is outside review scope: the reviewed video stays in video_with_roles")

		By("a rejected video fails the task before generation, without a fee")
		before = remain(acct)
		body["video_with_roles"] = []map[string]any{{"url": cdn + "/reject.mp4"}} // role reference_video by default
		failed := await(acct, "videos", submitted(acct, body))
		Expect(failed["status"]).To(Equal("failed"))
		Expect(failed["error"].(map[string]any)["message"]).To(ContainSubstring("rejected the video asset " + cdn + "/reject.mp4"))
		Expect(failed["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
		Expect(up.Submissions()).To(Equal(1), "nothing was submitted upstream")
		Expect(remain(acct)).To(Equal(before))

		By("a video_with_roles item with another role is refused, naming the field and the role")
		body["video_with_roles"] = []map[string]any{{"url": cdn + "/clip.mp4", "role": "first_frame"}}
		Expect(refused(acct, body)).To(Equal(`video_with_roles[0].role must be one of reference_video (got "first_frame")`))
		Expect(remain(acct)).To(Equal(before), "a refused request reserves nothing")
	})

	It("accepts image_with_roles items with role reference_image, reviewed or not, but not mixed with frames", func() {
		reviewed := reviewedVideoRoute("image-roles")
		images := []map[string]any{
			{"url": cdn + "/look.png", "role": "reference_image"},
			{"url": cdn + "/pose.png", "role": "reference_image"},
		}
		before := remain(acct)
		id := submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true, "duration": 2,
			"prompt": "image 1 in the pose of image 2", "image_with_roles": images})
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "20", "cost_usd": "0.1"}))
		task := taskObject(acct, id)
		Expect(task.Status.ReviewRounds).To(HaveLen(1))
		Expect(withoutCopies(task.Status.ReviewRounds[0].Assets)).To(Equal([]v1.ReviewAsset{
			{URL: cdn + "/look.png", Type: "image", Role: "reference_image", State: "passed"},
			{URL: cdn + "/pose.png", Type: "image", Role: "reference_image", State: "passed"},
		}))
		var req map[string]any
		Expect(json.Unmarshal(task.Spec.Request.Raw, &req)).To(Succeed())
		Expect(req["reference_images"]).To(Equal([]any{cdn + "/look.png", cdn + "/pose.png"}),
			"reference images travel in the model's own field")
		Expect(req).NotTo(HaveKey("image_with_roles"))

		By("without review the role is accepted as well")
		id = submitted(acct, map[string]any{"model": reviewed, "duration": 2, "image_with_roles": images[:1]})
		done = await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(taskObject(acct, id).Status.ReviewRounds).To(BeEmpty())
		Expect(remain(acct)).To(Equal(before - 100000)) // two tasks of 2 s at 0.05 USD

		By("reference images cannot be mixed with a first frame")
		msg := refused(acct, map[string]any{"model": reviewed, "private_asset_review": true, "image_with_roles": []map[string]any{
			{"url": cdn + "/start.png", "role": "first_frame"}, {"url": cdn + "/look.png", "role": "reference_image"}}})
		Expect(msg).To(ContainSubstring(media.MixedFramesMessage))
		Expect(remain(acct)).To(Equal(before - 100000))
	})

	It("reviews and sends only the first nonempty image field instead of refusing a second one", func() {
		reviewed := reviewedVideoRoute("image-fields")
		before := remain(acct)
		By("reference_images before image_urls: the second field is neither reviewed (it would be rejected) nor sent")
		id := submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true, "duration": 2, "prompt": "image 1",
			"reference_images": []string{cdn + "/first.png"},
			"image_urls":       []string{cdn + "/reject-second.png"}})
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		task := taskObject(acct, id)
		Expect(withoutCopies(task.Status.ReviewRounds[0].Assets)).To(Equal([]v1.ReviewAsset{
			{URL: cdn + "/first.png", Type: "image", Role: "reference_image", State: "passed"}}))
		var req map[string]any
		Expect(json.Unmarshal(task.Spec.Request.Raw, &req)).To(Succeed())
		Expect(req["reference_images"]).To(Equal([]any{cdn + "/first.png"}))
		Expect(req).NotTo(HaveKey("image_urls"))

		By("image_with_roles before reference_images")
		id = submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true, "duration": 2, "prompt": "image 1",
			"image_with_roles": []map[string]any{{"url": cdn + "/chosen.png", "role": "reference_image"}},
			"reference_images": []string{cdn + "/reject-ignored.png"}})
		done = await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(withoutCopies(taskObject(acct, id).Status.ReviewRounds[0].Assets)).To(Equal([]v1.ReviewAsset{
			{URL: cdn + "/chosen.png", Type: "image", Role: "reference_image", State: "passed"}}))
		Expect(remain(acct)).To(Equal(before - 100000))

		By("the model's own rule still refuses frames next to another image field")
		msg := refused(acct, map[string]any{"model": reviewed, "private_asset_review": true,
			"image_with_roles": []map[string]any{{"url": cdn + "/start.png", "role": "first_frame"}},
			"image_urls":       []string{cdn + "/other.png"}})
		Expect(msg).To(ContainSubstring(media.MixedFramesMessage))
	})

	It("copies URL assets under review and fails an empty, mistyped or oversized one without a fee", func() {
		reviewed := reviewedVideoRoute("url-copies")
		before := remain(acct)
		id := submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true, "duration": 2, "prompt": "image 1, video 1",
			"reference_images": []string{cdn + "/look.png"},
			"video_with_roles": []map[string]any{{"url": cdn + "/clip.mp4"}}})
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(remain(acct)).To(Equal(before - 50000))

		By("each URL asset was stored by the review, typed by its bytes")
		for _, c := range []struct{ typ, url, ext string }{{"image", cdn + "/look.png", ".png"}, {"video", cdn + "/clip.mp4", ".mp4"}} {
			r, err := stack.Blobs.Open(ctx, assetcopy.Key(acct.Namespace, c.typ, c.url)+c.ext)
			Expect(err).NotTo(HaveOccurred(), c.url)
			Expect(r.Close()).To(Succeed())
		}

		for _, c := range []struct{ field, url, message string }{
			{"reference_images", cdn + "/empty.png", "the image asset is empty"},
			{"reference_images", cdn + "/fake.png", "the image asset is not a supported image (JPEG, PNG, WebP or GIF)"},
			{"reference_images", cdn + "/huge.png", "the image asset is larger than 20 MiB, the private asset review limit"},
			{"audio_with_roles", cdn + "/fake.mp3", "the audio asset is not a supported audio (MP3, WAV or M4A)"},
			{"video_with_roles", cdn + "/look.png", "the video asset is not a supported video (MP4, MOV or WebM)"},
			{"reference_images", cdn + "/missing.gif", "the image asset could not be downloaded: HTTP 404"},
		} {
			By(c.url)
			var value any = []string{c.url}
			if c.field != "reference_images" {
				value = []map[string]any{{"url": c.url}}
			}
			failed := await(acct, "videos", submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true,
				"duration": 2, "prompt": "refused", c.field: value}))
			Expect(failed["status"]).To(Equal("failed"))
			e := failed["error"].(map[string]any)
			Expect(e["code"]).To(Equal("generation_failed"))
			Expect(e["message"]).To(ContainSubstring(c.message))
			Expect(e["message"]).To(ContainSubstring("no video generation fee is charged"))
			Expect(failed["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
			Expect(remain(acct)).To(Equal(before-50000), "nothing is charged")
		}
	})

	It("sums reviewed reference durations from the files, not from what the client declares", func() {
		reviewed := reviewedVideoRoute("probed-durations")
		before := remain(acct)
		By("two videos declared as 1 s each but 9 s and 8 s long")
		failed := await(acct, "videos", submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true,
			"duration": 2, "prompt": "video 1 then video 2", "video_with_roles": []map[string]any{
				{"url": cdn + "/9s.mp4", "duration": 1}, {"url": cdn + "/8s.mp4", "duration": 1}}}))
		Expect(failed["status"]).To(Equal("failed"))
		Expect(failed["error"].(map[string]any)["message"]).To(Equal(
			"video_with_roles durations must total at most 15 seconds (got 17 s, read from the files); no video generation fee is charged"))
		Expect(failed["billing"]).To(Equal(map[string]any{"status": "refunded", "credits": "0", "cost_usd": "0"}))
		Expect(remain(acct)).To(Equal(before))

		By("within 15 s in total the task runs, whatever was declared")
		done := await(acct, "videos", submitted(acct, map[string]any{"model": reviewed, "private_asset_review": true,
			"duration": 2, "prompt": "video 1 then video 2", "video_with_roles": []map[string]any{
				{"url": cdn + "/9s.mp4"}, {"url": cdn + "/6s.mp4", "duration": 14}}}))
		Expect(done["status"]).To(Equal("completed"), "%v", done)
	})

	It("reads the durations of uploaded reference videos and audio from their bytes at submission", func() {
		model := mediaRoute("uploaded-durations", v1.ModelTypeVideo, v1.ProfileAllInOneVideo, v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond,
			PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05", InputUnitPrice: credits("0.01")})
		upload := func(path, name string, data []byte) string {
			code, body := postMultipart(path, acct.Key, filePart(name, "application/octet-stream", data))
			Expect(code).To(Equal(200), "%v", body)
			return body["data"].(map[string]any)["url"].(string)
		}
		nine := upload("/v1/uploads/videos", "nine.mp4", uploadstest.Movie("isom", 9, 1024, true))
		eight := upload("/v1/uploads/videos", "eight.webm", uploadstest.WebMMovie(8, 1024))
		long := upload("/v1/uploads/audios", "long.wav", uploadstest.WAV(8000*16))
		before := remain(acct)

		By("two uploaded videos declared as 1 s each are 17 s long")
		var msg string
		Eventually(func(g Gomega) { // until the gateway's cache has the route
			code, resp, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": model, "duration": 2,
				"video_list": []map[string]any{{"video_url": nine, "duration": 1}, {"video_url": eight, "duration": 1}}})
			g.Expect(code).To(Equal(400), "%v", resp)
			msg = resp["error"].(map[string]any)["message"].(string)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(msg).To(Equal("video_list durations must total at most 15 seconds (got 17 s, read from the uploaded files)"))

		By("an uploaded audio of 16 s declared as 2 s")
		code, resp, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": model, "duration": 2,
			"prompt": "audio 1", "audio_with_roles": []map[string]any{{"url": long, "duration": 2}}})
		Expect(code).To(Equal(400), "%v", resp)
		Expect(resp["error"].(map[string]any)["message"]).To(Equal(
			"audio_with_roles durations must total at most 15 seconds (got 16 s, read from the uploaded files)"))
		Expect(remain(acct)).To(Equal(before), "a refused request reserves nothing")

		By("the input video seconds billed are the file's 9 s, not the 1 s declared: 2 × 0.05 + 9 × 0.01 USD")
		id := submitted(acct, map[string]any{"model": model, "duration": 2, "video_list": []map[string]any{{"video_url": nine, "duration": 1}}})
		Expect(remain(acct)).To(Equal(before - 95000))
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "38", "cost_usd": "0.19"}))
	})

	It("bills a token-priced image model by the usage it reports, and shows that usage", func() {
		model := mediaRoute("tokens", v1.ModelTypeImage, v1.ProfileMultiImage, v1.PriceRuleSpec{ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "4",
			ImageTokenPrices: &v1.ImageTokenPrices{TextInput: credits("4"), ImageOutput: credits("50")}})
		before := remain(acct)
		code, sub, _ := call("POST", "/v1/images/generations", bearer(acct.Key), map[string]any{"model": model, "prompt": "two owls", "n": 2})
		Expect(code).To(Equal(200), "%v", sub)
		By("the reservation covers the prompt's bytes and 6 240 output tokens per image: 8×4 + 2×6240×50 per 1M USD")
		Expect(remain(acct)).To(Equal(before - 312016))
		done := await(acct, "images", sub["id"].(string))
		Expect(done["status"]).To(Equal("completed"), "%v", done)
		By("the simulated backend reports 2 text tokens in and 1 056 image tokens per output: 2×4 + 2112×50 per 1M USD")
		Expect(done["billing"]).To(Equal(map[string]any{"status": "settled", "credits": "21.1216", "cost_usd": "0.105608"}))
		Expect(done["usage"]).To(Equal(map[string]any{"input_tokens": json.Number("2"), "output_tokens": json.Number("2112"),
			"total_tokens":          json.Number("2114"),
			"input_tokens_details":  map[string]any{"text_tokens": json.Number("2"), "image_tokens": json.Number("0"), "cached_tokens": json.Number("0")},
			"output_tokens_details": map[string]any{"text_tokens": json.Number("0"), "image_tokens": json.Number("2112")}}))
		Expect(remain(acct)).To(Equal(before - 52804))
		rows := usageRows(acct)
		var row map[string]any
		for _, r := range rows {
			if r["task_id"] == sub["id"] {
				row = r
			}
		}
		Expect(row).NotTo(BeNil())
		Expect(num(row["prompt_tokens"])).To(Equal("2"))
		Expect(num(row["completion_tokens"])).To(Equal("2112"))
		Expect(num(row["quota"])).To(Equal("52804"))
	})

	It("checks uploaded reference images of the multi-image family by their content", func() {
		upload := func(data []byte) string {
			code, body := postMultipart("/v1/uploads/images", acct.Key, filePart("ref.png", "image/png", data))
			Expect(code).To(Equal(200), "%v", body)
			return body["data"].(map[string]any)["url"].(string)
		}
		good, tiny := upload(uploadstest.PNG(64, 48)), upload(uploadstest.PNG(10, 10))
		code, sub, _ := call("POST", "/v1/images/generations", bearer(acct.Key),
			map[string]any{"model": multi, "prompt": "like this", "image_urls": []string{good}})
		Expect(code).To(Equal(200), "%v", sub)
		await(acct, "images", sub["id"].(string))
		before := remain(acct)
		code, body, _ := call("POST", "/v1/images/generations", bearer(acct.Key),
			map[string]any{"model": multi, "prompt": "like this", "image_urls": []string{good, tiny}})
		Expect(code).To(Equal(400), "%v", body)
		Expect(body["error"].(map[string]any)["message"]).To(ContainSubstring("width and height must be greater than 14 px (got 10x10)"))
		Expect(remain(acct)).To(Equal(before), "a refused request reserves nothing")
	})

	It("stores an inline review image once per content and reviews it by digest", func() {
		reviewed := reviewedVideoRoute("inline-reviewed")

		var buf bytes.Buffer
		Expect(png.Encode(&buf, image.NewNRGBA(image.Rect(0, 0, 3, 2)))).To(Succeed())
		raw := buf.Bytes()
		sum := sha256.Sum256(raw)
		digest := hex.EncodeToString(sum[:])
		var id string
		Eventually(func(g Gomega) { // until the gateway's cache has the switch on
			code, sub, _ := call("POST", "/v1/videos/generations", bearer(acct.Key), map[string]any{"model": reviewed,
				"private_asset_review": true, "duration": 2,
				"image_with_roles": []map[string]any{{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw), "role": "first_frame"}}})
			g.Expect(code).To(Equal(200), "%v", sub)
			id = sub["id"].(string)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		done := await(acct, "videos", id)
		Expect(done["status"]).To(Equal("completed"), "%v", done)

		task := &v1.GenerationTask{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: tasks.ObjectName(id)}, task)).To(Succeed())
		key := "tenants/" + acct.Namespace + "/review-assets/" + digest + ".png"
		Expect(string(task.Spec.Request.Raw)).To(ContainSubstring(`"url":"`+tasks.BlobScheme+key+`"`),
			"the stored copy's reference replaces the inline data in the task")
		Expect(len(task.Spec.Request.Raw)).To(BeNumerically("<", 1024))
		Expect(withoutCopies(task.Status.ReviewRounds[0].Assets)).To(Equal([]v1.ReviewAsset{{URL: "sha256:" + digest,
			Type: "image", Role: "first_frame", State: "passed"}}))
		r, err := stack.Blobs.Open(ctx, key)
		Expect(err).NotTo(HaveOccurred())
		stored, err := io.ReadAll(r)
		Expect(r.Close()).To(Succeed())
		Expect(err).NotTo(HaveOccurred())
		Expect(stored).To(Equal(raw), "the decoded image is stored")
	})

	It("answers a batch query of at most 100 IDs", func() {
		var ids []string
		for range 2 {
			code, sub, _ := call("POST", "/v1/images/generations", bearer(acct.Key), map[string]any{"model": multi, "prompt": "batch"})
			Expect(code).To(Equal(200))
			ids = append(ids, sub["id"].(string))
		}
		code, body, _ := call("GET", "/v1/images/generations?ids="+strings.Join(append(ids, "task_missing"), ","), bearer(acct.Key), nil)
		Expect(code).To(Equal(200), "%v", body)
		Expect(body["object"]).To(Equal("list"))
		data := body["data"].([]any)
		Expect(data).To(HaveLen(2))
		Expect(data[0].(map[string]any)["id"]).To(Equal(ids[0]))
		Expect(data[1].(map[string]any)["id"]).To(Equal(ids[1]))
		Expect(body["not_found"]).To(Equal([]any{"task_missing"}))
		By("another tenant sees none of them")
		code, body, _ = call("GET", "/v1/images/generations?ids="+strings.Join(ids, ","), bearer(other.Key), nil)
		Expect(code).To(Equal(200))
		Expect(body["data"]).To(BeEmpty())
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("task_%d", i)
		}
		code, body, _ = call("GET", "/v1/images/generations?ids="+strings.Join(many, ","), bearer(acct.Key), nil)
		Expect(code).To(Equal(400))
		Expect(body["error"].(map[string]any)["type"]).To(Equal("invalid_request"))
		for _, id := range ids {
			await(acct, "images", id)
		}
	})
})

func mustInt(v any) int64 {
	n, err := v.(json.Number).Int64()
	Expect(err).NotTo(HaveOccurred())
	return n
}

// withoutCopies checks that every reviewed asset has its stored copy (the
// upstream receives the copy) and returns the assets without the copy and
// the probed duration, to compare with what was submitted.
func withoutCopies(assets []v1.ReviewAsset) []v1.ReviewAsset {
	GinkgoHelper()
	out := append([]v1.ReviewAsset(nil), assets...)
	for i := range out {
		Expect(out[i].Copy).NotTo(BeEmpty(), "asset %s has its reviewed copy", out[i].URL)
		out[i].Copy, out[i].DurationMillis = "", 0
	}
	return out
}
