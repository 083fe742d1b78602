package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

// mediaModel declares an image or video model with one per-request or
// per-second price, in namespace ns, and waits for both to be usable.
func mediaModel(t testing.TB, ns, model string, typ v1.ModelType, profile v1.ValidationProfile, price *v1.PriceRuleSpec) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: ns},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: typ, ValidationProfile: profile,
			Backends: []v1.Backend{sim("sim", "simulated")}},
	}
	g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), route) })
	g.Expect(stack.WaitReady(ctx, route)).To(Succeed())
	if price == nil {
		return
	}
	price.Model = v1.ModelID(model)
	rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "price-", Namespace: ns}, Spec: *price}
	g.Expect(stack.Client.Create(ctx, rule)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), rule) })
	g.Expect(stack.WaitReady(ctx, rule)).To(Succeed(), "published")
	g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, rule)).To(Succeed())
}

func perRequest(usd string) *v1.PriceRuleSpec {
	return &v1.PriceRuleSpec{ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: v1.Decimal(usd)}
}

func getJSON(t testing.TB, path, key string) (int, http.Header, map[string]any) {
	t.Helper()
	g := NewWithT(t)
	req, _ := http.NewRequest("GET", stack.BaseURL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var body map[string]any
	g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
	return resp.StatusCode, resp.Header, body
}

func ids(body map[string]any) []string {
	out := []string{}
	for _, d := range body["data"].([]any) {
		out = append(out, d.(map[string]any)["id"].(string))
	}
	return out
}

var _ = Describe("The model and pricing catalogs", func() {
	It("models lists what the key may use", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		text, image, video, unpriced := uniqueModel("m-text"), uniqueModel("m-image"), uniqueModel("m-video"), uniqueModel("m-unpriced")
		textModel(t, framework.SystemNamespace, text, sim("sim", "simulated"))
		mediaModel(t, framework.SystemNamespace, image, v1.ModelTypeImage, v1.ProfileSingleImage, perRequest("0.03"))
		mediaModel(t, framework.SystemNamespace, video, v1.ModelTypeVideo, v1.ProfileAllInOneVideo,
			&v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond, UnitPrice: "0.05"})
		mediaModel(t, framework.SystemNamespace, unpriced, v1.ModelTypeImage, v1.ProfileImageEdit, nil)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		code, _, body := getJSON(t, "/v1/models", acct.Key)
		g.Expect(code).To(Equal(200))
		g.Expect(body["success"]).To(BeTrue())
		g.Expect(body["object"]).To(Equal("list"))
		g.Expect(ids(body)).To(ContainElement(text))
		g.Expect(ids(body)).NotTo(ContainElements(image, video), "default type is text")
		entry := body["data"].([]any)[0].(map[string]any)
		g.Expect(entry).To(HaveKeyWithValue("object", "model"))
		g.Expect(entry).To(HaveKey("created"))
		g.Expect(entry).To(HaveKey("owned_by"))
		g.Expect(entry["supported_endpoint_types"]).To(ContainElements("chat_completions", "responses"))

		_, _, body = getJSON(t, "/v1/models?type=image", acct.Key)
		g.Expect(ids(body)).To(ContainElement(image))
		g.Expect(ids(body)).NotTo(ContainElement(unpriced), "an unpriced model is not offered")
		_, _, body = getJSON(t, "/v1/models?type=all", acct.Key)
		g.Expect(ids(body)).To(ContainElements(text, image, video))
		code, _, _ = getJSON(t, "/v1/models?type=hologram", acct.Key)
		g.Expect(code).To(Equal(400))

		limited := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{ModelLimitsEnabled: true, ModelLimits: []v1.ModelID{v1.ModelID(image)}})
		_, _, body = getJSON(t, "/v1/models?type=all", limited.Key)
		g.Expect(ids(body)).To(ContainElement(image))
		g.Expect(ids(body)).NotTo(ContainElements(text, video))

		code, _, body = getJSON(t, "/v1/models", "sk-wrong")
		g.Expect(code).To(Equal(401))
		g.Expect(body["error"]).To(HaveKeyWithValue("code", BeNumerically("==", 401)))
	})

	It("pricing catalog", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		image := uniqueModel("p-image")
		mediaModel(t, framework.SystemNamespace, image, v1.ModelTypeImage, v1.ProfileSingleImage, perRequest("0.03"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})

		code, hdr, body := getJSON(t, "/v1/pricing?model="+image, acct.Key)
		g.Expect(code).To(Equal(200))
		g.Expect(hdr.Get("Cache-Control")).To(Equal("private, no-store"))
		g.Expect(body).To(HaveKeyWithValue("object", "list"))
		g.Expect(body).To(HaveKeyWithValue("currency", "USD"))
		g.Expect(body).To(HaveKeyWithValue("has_more", false))
		g.Expect(body).To(HaveKeyWithValue("next_after", ""))
		data := body["data"].([]any)
		g.Expect(data).To(HaveLen(1))
		item := data[0].(map[string]any)
		g.Expect(item).To(HaveKeyWithValue("id", image))
		g.Expect(item).To(HaveKeyWithValue("type", "image"))
		price := item["prices"].([]any)[0].(map[string]any)
		g.Expect(price).To(HaveKeyWithValue("group", "default"))
		g.Expect(price).To(HaveKeyWithValue("charge_type", "per_request"))
		g.Expect(price).To(HaveKeyWithValue("price_basis", "request"))
		g.Expect(price).To(HaveKeyWithValue("unit", "request"))
		g.Expect(price).To(HaveKeyWithValue("unit_price", "0.03"))

		By := func(string) {}
		By("a customer price in the tenant's namespace replaces the platform price")
		mediaModel(t, acct.Namespace, image+"-x", v1.ModelTypeImage, v1.ProfileSingleImage, nil)
		custom := perRequest("0.02")
		custom.Model = v1.ModelID(image)
		rule := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: "customer", Namespace: acct.Namespace}, Spec: *custom}
		g.Expect(stack.Client.Create(context.Background(), rule)).To(Succeed())
		g.Eventually(func() any {
			_, _, body := getJSON(t, "/v1/pricing?model="+image, acct.Key)
			return body["data"].([]any)[0].(map[string]any)["prices"].([]any)[0].(map[string]any)["unit_price"]
		}, framework.Timeout, framework.Interval).Should(Equal("0.02"))

		code, hdr, body = getJSON(t, "/v1/pricing?model=no-such-model", acct.Key)
		g.Expect(code).To(Equal(404))
		g.Expect(hdr.Get("Cache-Control")).To(Equal("private, no-store"))
		g.Expect(body["error"]).To(HaveKeyWithValue("code", "model_not_found"))
		for _, q := range []string{"?limit=0", "?limit=101", "?type=text", "?color=red", "?limit=5&limit=6"} {
			code, _, body = getJSON(t, "/v1/pricing"+q, acct.Key)
			g.Expect(code).To(Equal(400), q)
			g.Expect(body["error"]).To(HaveKeyWithValue("code", "invalid_request_error"))
		}
		code, _, _ = getJSON(t, "/v1/pricing", "sk-wrong")
		g.Expect(code).To(Equal(401))

		// An empty after is the first page: next_after is empty on the last
		// page, and a client that feeds it back starts over, not fails.
		code, _, first := getJSON(t, "/v1/pricing?limit=1", acct.Key)
		g.Expect(code).To(Equal(200))
		code, _, empty := getJSON(t, "/v1/pricing?limit=1&after=", acct.Key)
		g.Expect(code).To(Equal(200), "after= is not a bad cursor: %v", empty)
		g.Expect(empty["data"]).To(Equal(first["data"]))
		code, _, _ = getJSON(t, "/v1/pricing?after=%21", acct.Key)
		g.Expect(code).To(Equal(400), "a cursor that is not one is still refused")
	})
})

var _ = Describe("The model list through the official SDKs", func() {
	// One /v1/models serves both families' SDKs: Anthropic's lists and pages
	// it (limit, after_id) and gets one model; OpenAI's lists and gets one.
	It("lists, pages and gets models with the Anthropic and OpenAI SDKs", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		var models []string
		for i := range 3 {
			m := uniqueModel(fmt.Sprintf("sdk-list-%d", i))
			textModel(t, acct.Namespace, m, sim("sim", "simulated")) // the tenant's own: its list holds these and the platform's
			models = append(models, m)
		}

		ac := anthropicClient(acct.Key)
		var listed []string
		pager := ac.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2)})
		for pager.Next() {
			m := pager.Current()
			g.Expect(string(m.Type)).To(Equal("model"))
			g.Expect(m.DisplayName).NotTo(BeEmpty())
			g.Expect(m.CreatedAt.IsZero()).To(BeFalse(), "created_at is an RFC 3339 time")
			listed = append(listed, m.ID)
		}
		g.Expect(pager.Err()).NotTo(HaveOccurred())
		g.Expect(listed).To(ContainElements(models), "paged two at a time to the end")
		g.Expect(listed).To(HaveLen(len(uniq(listed))), "no model twice across pages")
		one, err := ac.Models.Get(ctx, models[1], anthropic.ModelGetParams{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(one.ID).To(Equal(models[1]))
		g.Expect(one.MaxTokens).To(Equal(int64(64000)), "the route's maxOutputTokens")
		_, err = ac.Models.Get(ctx, "no-such-model", anthropic.ModelGetParams{})
		var aerr *anthropic.Error
		g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
		g.Expect(aerr.StatusCode).To(Equal(http.StatusNotFound))

		oc := openaiClient(acct.Key)
		page, err := oc.Models.List(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var oids []string
		for _, m := range page.Data {
			g.Expect(string(m.Object)).To(Equal("model"))
			g.Expect(m.OwnedBy).NotTo(BeEmpty())
			g.Expect(m.Created).To(BeNumerically(">", 0))
			oids = append(oids, m.ID)
		}
		g.Expect(oids).To(ContainElements(models))
		om, err := oc.Models.Get(ctx, models[2])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(om.ID).To(Equal(models[2]))
	})
})

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
