package pricing

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

type be struct {
	name     string
	groups   []string
	ready    bool
	disabled bool
	options  map[string]string
}

func route(ns, model string, typ v1.ModelType, profile v1.ValidationProfile, backends ...be) v1.ModelRoute {
	rt := v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: model, Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
		Spec:       v1.ModelRouteSpec{Model: v1.ModelID(model), Type: typ, ValidationProfile: profile},
	}
	for _, b := range backends {
		var groups []v1.GroupName
		for _, g := range b.groups {
			groups = append(groups, v1.GroupName(g))
		}
		rt.Spec.Backends = append(rt.Spec.Backends, v1.Backend{Name: b.name, Provider: "simulated", Groups: groups, Disabled: b.disabled, Options: b.options})
		rt.Status.Backends = append(rt.Status.Backends, v1.BackendStatus{Name: b.name, Ready: b.ready})
	}
	return rt
}

func fixture() CatalogInput {
	imgA := perRequest("img-a", "0.03")
	imgA.InputImageUnitPrice = dec("0.003")
	imgAVip := withGroup(imgA, "vip")
	imgAVip.GroupRatio = dec("0.8")
	customer := perRequest("img-a", "0.025")
	customer.InputImageUnitPrice = dec("0.002")
	customer.FreeInputImageCount = i32(1)

	vidHD := withCond(perSecond("vid-a", "0.05"), res("1080p"))
	vidHD.Period = "peak-offpeak"
	vidHD.Timezone = "Asia/Shanghai"
	vidHD.ScheduleVersion = "2026-01"
	vidHD.PeakWindows = []v1.PeakWindow{
		{Days: []v1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "09:00", End: "18:00", Multiplier: dec("1.50")},
		{Start: "22:00", End: "02:00", UnitPrice: dec("0.04")},
	}
	vidVip := withGroup(perSecond("vid-a", "0.1"), "vip")
	vidVip.MinimumChargeUSD = dec("0.2")
	vidVip.GroupRatio = dec("1.25")

	gptImage := perToken("img-tokens", "text_input_tokens", "5")
	gptImage.ImageTokenPrices = &v1.ImageTokenPrices{TextInput: dec("5"), CachedTextInput: dec("1.25"), ImageInput: dec("10"), ImageOutput: dec("40")}

	return CatalogInput{
		SystemNamespace: sysNS,
		TenantNamespace: "tenant-a",
		Groups:          []string{"default"},
		Routes: []v1.ModelRoute{
			route(sysNS, "img-a", v1.ModelTypeImage, v1.ProfileSingleImage, be{name: "b1", groups: []string{"default", "vip"}, ready: true}),
			route(sysNS, "img-b", v1.ModelTypeImage, v1.ProfileMultiImage, be{name: "b1", ready: false}),
			route(sysNS, "img-tokens", v1.ModelTypeImage, v1.ProfileImageEdit, be{name: "b1", ready: true}),
			route(sysNS, "vid-a", v1.ModelTypeVideo, v1.ProfileAllInOneVideo,
				be{name: "b1", ready: true, options: map[string]string{OptionResolutions: "720p, 1080p", OptionVideoInput: "false"}},
				be{name: "b2", groups: []string{"vip"}, ready: true}),
			route(sysNS, "chat", v1.ModelTypeText, "", be{name: "b1", ready: true}),
			route(sysNS, "img-disabled", v1.ModelTypeImage, v1.ProfileImageEdit, be{name: "b1", ready: true, disabled: true}),
			route(sysNS, "img-vip-only", v1.ModelTypeImage, v1.ProfileImageEdit, be{name: "b1", groups: []string{"vip"}, ready: true}),
			route("tenant-a", "img-private", v1.ModelTypeImage, v1.ProfileImageEdit, be{name: "b1", ready: true}),
			route("tenant-b", "img-other", v1.ModelTypeImage, v1.ProfileImageEdit, be{name: "b1", ready: true}),
		},
		Rules: []v1.PriceRule{
			published(sysNS, "img-a", 0, imgA),
			published(sysNS, "img-a-vip", 0, imgAVip),
			published("tenant-a", "img-a", 1, customer),
			published(sysNS, "img-b", 0, perRequest("img-b", "0.04")),
			published(sysNS, "img-tokens", 0, gptImage),
			published(sysNS, "vid-hd", 0, vidHD),
			published(sysNS, "vid-sd", 0, withCond(perSecond("vid-a", "0.03"), res("720p"))),
			published(sysNS, "vid-hd-video", 0, withCond(perSecond("vid-a", "0.08"), resVid("1080p", true))),
			published(sysNS, "vid-vip", 0, vidVip),
			published(sysNS, "chat", 0, perToken("chat", "text_input_tokens", "3")),
			published("tenant-a", "img-private", 0, perRequest("img-private", "0.5")),
			published("tenant-b", "img-other", 0, perRequest("img-other", "0.5")),
		},
	}
}

func ids(p *CatalogPage) []string {
	out := []string{}
	for _, it := range p.Data {
		out = append(out, it.ID)
	}
	return out
}

func TestCatalogGolden(t *testing.T) {
	g := NewWithT(t)
	in := fixture()
	in.Groups = []string{"vip", "default", "default"} // automatic group selection
	page, err := BuildCatalog(in, CatalogQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := json.MarshalIndent(page, "", "  ")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(MatchJSON(goldenPage), string(got))
}

const goldenPage = `{
  "object": "list",
  "currency": "USD",
  "data": [
    {
      "id": "img-a",
      "type": "image",
      "prices": [
        {
          "group": "default",
          "conditions": {},
          "charge_type": "per_request",
          "price_basis": "request",
          "unit": "request",
          "unit_price": "0.025",
          "input_image_unit_price": "0.002",
          "free_input_image_count": 1
        },
        {
          "group": "vip",
          "conditions": {},
          "charge_type": "per_request",
          "price_basis": "request",
          "unit": "request",
          "unit_price": "0.024",
          "input_image_unit_price": "0.0024"
        }
      ]
    },
    {
      "id": "img-b",
      "type": "image",
      "prices": []
    },
    {
      "id": "img-private",
      "type": "image",
      "prices": [
        {
          "group": "default",
          "conditions": {},
          "charge_type": "per_request",
          "price_basis": "request",
          "unit": "request",
          "unit_price": "0.5"
        }
      ]
    },
    {
      "id": "img-tokens",
      "type": "image",
      "prices": [
        {
          "group": "default",
          "conditions": {},
          "charge_type": "per_token",
          "price_basis": "text_input_tokens",
          "unit": "1m_tokens",
          "unit_price": "5",
          "image_token_prices": {
            "text_input": "5",
            "cached_text_input": "1.25",
            "image_input": "10",
            "cached_image_input": "10",
            "image_output": "40"
          }
        }
      ]
    },
    {
      "id": "img-vip-only",
      "type": "image",
      "prices": []
    },
    {
      "id": "vid-a",
      "type": "video",
      "prices": [
        {
          "group": "default",
          "conditions": {"resolution": "1080p", "has_video_input": false},
          "charge_type": "per_second",
          "price_basis": "output_seconds",
          "unit": "second",
          "unit_price": "0.05",
          "pricing_period": "peak-offpeak",
          "pricing_timezone": "Asia/Shanghai",
          "pricing_schedule_version": "2026-01",
          "pricing_peak_windows": [
            {"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "start": "09:00", "end": "18:00", "multiplier": "1.5"},
            {"start": "22:00", "end": "02:00", "unit_price": "0.04"}
          ]
        },
        {
          "group": "default",
          "conditions": {"resolution": "720p", "has_video_input": false},
          "charge_type": "per_second",
          "price_basis": "output_seconds",
          "unit": "second",
          "unit_price": "0.03"
        },
        {
          "group": "vip",
          "conditions": {},
          "charge_type": "per_second",
          "price_basis": "output_seconds",
          "unit": "second",
          "unit_price": "0.125",
          "minimum_charge_usd": "0.25"
        }
      ]
    }
  ],
  "has_more": false,
  "next_after": ""
}`

func TestCatalogFilters(t *testing.T) {
	g := NewWithT(t)
	in := fixture()

	page, err := BuildCatalog(in, CatalogQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	// Text models, disabled backends, other tenants' routes and groups the
	// key may not use are not listed.
	g.Expect(ids(page)).To(Equal([]string{"img-a", "img-b", "img-private", "img-tokens", "vid-a"}))
	g.Expect(page.HasMore).To(BeFalse())
	g.Expect(page.NextAfter).To(BeEmpty())

	page, err = BuildCatalog(in, CatalogQuery{Type: "video"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids(page)).To(Equal([]string{"vid-a"}))
	// Only the default group, and the 1080p video-input price is dropped:
	// the default group's only backend does not accept video input.
	g.Expect(page.Data[0].Prices).To(HaveLen(2))

	page, err = BuildCatalog(in, CatalogQuery{Model: "img-a"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids(page)).To(Equal([]string{"img-a"}))
	g.Expect(page.Data[0].Prices).To(HaveLen(1))
	g.Expect(page.Data[0].Prices[0].UnitPrice).To(Equal("0.025"), "customer price")

	page, err = BuildCatalog(in, CatalogQuery{Model: "img-a", Type: "video"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).To(BeEmpty())

	for _, m := range []string{"chat", "img-other", "img-disabled", "img-vip-only", "missing"} {
		_, err = BuildCatalog(in, CatalogQuery{Model: m})
		g.Expect(err).To(MatchError(ErrModelNotFound), m)
	}

	in.ModelAllowed = func(m string) bool { return m == "vid-a" }
	page, err = BuildCatalog(in, CatalogQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids(page)).To(Equal([]string{"vid-a"}))
	_, err = BuildCatalog(in, CatalogQuery{Model: "img-a"})
	g.Expect(err).To(MatchError(ErrModelNotFound))
}

func TestCatalogEmptyPricesWhenNotSafe(t *testing.T) {
	g := NewWithT(t)
	priceOf := func(in CatalogInput, model string) []CatalogPrice {
		page, err := BuildCatalog(in, CatalogQuery{Model: model})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Data).To(HaveLen(1))
		return page.Data[0].Prices
	}

	// The model's only backend becomes not ready: the price disappears, and
	// returns when the backend is ready again.
	in := fixture()
	g.Expect(priceOf(in, "img-private")).To(HaveLen(1))
	for i := range in.Routes {
		if in.Routes[i].Spec.Model == "img-private" {
			in.Routes[i].Status.Backends[0].Ready = false
		}
	}
	g.Expect(priceOf(in, "img-private")).To(BeEmpty())

	// A published customer rule that cannot be compiled: no price for that
	// group at all (never the public price instead).
	in = fixture()
	for i := range in.Rules {
		if in.Rules[i].Namespace == "tenant-a" && in.Rules[i].Name == "img-a" {
			in.Rules[i].Spec.UnitPrice = "bad"
		}
	}
	g.Expect(priceOf(in, "img-a")).To(BeEmpty())

	// Two visible rules that overlap (equal specificity, can both match).
	in = fixture()
	in.Rules = append(in.Rules, published(sysNS, "vid-video", 9, withCond(perSecond("vid-a", "0.09"), vid(true))))
	g.Expect(priceOf(in, "vid-a")).To(BeEmpty())

	// No rule for the group.
	in = fixture()
	g.Expect(priceOf(in, "img-b")).To(BeEmpty())

	// Unpublished rules are not served.
	in = fixture()
	for i := range in.Rules {
		if in.Rules[i].Spec.Model == "img-private" {
			in.Rules[i].Status.Conditions = nil
		}
	}
	g.Expect(priceOf(in, "img-private")).To(BeEmpty())

	// A backend limited to 720p cannot back a 1080p price.
	in = fixture()
	in.Routes[3].Spec.Backends[0].Options[OptionResolutions] = "720p"
	prices := priceOf(in, "vid-a")
	g.Expect(prices).To(HaveLen(1))
	g.Expect(prices[0].Conditions.Resolution).To(Equal("720p"))
}

func TestCatalogConditionDefaults(t *testing.T) {
	g := NewWithT(t)
	mk := func(rules ...v1.PriceRule) []CatalogPrice {
		in := CatalogInput{SystemNamespace: sysNS, TenantNamespace: "t", Groups: []string{"default"},
			Routes: []v1.ModelRoute{route(sysNS, "v", v1.ModelTypeVideo, v1.ProfileAllInOneVideo, be{name: "b", ready: true})},
			Rules:  rules}
		page, err := BuildCatalog(in, CatalogQuery{})
		g.Expect(err).NotTo(HaveOccurred())
		return page.Data[0].Prices
	}
	conds := func(ps []CatalogPrice) []string {
		out := []string{}
		for _, p := range ps {
			v := "-"
			if p.Conditions.HasVideoInput != nil {
				v = fmt.Sprint(*p.Conditions.HasVideoInput)
			}
			out = append(out, p.Conditions.Resolution+"/"+v)
		}
		return out
	}
	// A single price that does not vary: no default is needed.
	g.Expect(conds(mk(published(sysNS, "a", 0, perSecond("v", "1"))))).To(Equal([]string{"/-"}))
	// Price varies on resolution, the fallback covers the default 1080p.
	g.Expect(conds(mk(
		published(sysNS, "a", 0, perSecond("v", "1")),
		published(sysNS, "b", 0, withCond(perSecond("v", "2"), res("720p"))),
	))).To(Equal([]string{"1080p/-", "720p/-"}))
	// Another rule claims the default: the fallback stays unconditioned.
	g.Expect(conds(mk(
		published(sysNS, "a", 0, perSecond("v", "1")),
		published(sysNS, "b", 0, withCond(perSecond("v", "2"), res("1080p"))),
	))).To(Equal([]string{"/-", "1080p/-"}))
	// Price varies on video input: the fallback is the no-video price.
	g.Expect(conds(mk(
		published(sysNS, "a", 0, perSecond("v", "1")),
		published(sysNS, "b", 0, withCond(perSecond("v", "2"), vid(true))),
	))).To(Equal([]string{"/false", "/true"}))
}

func TestCatalogPagination(t *testing.T) {
	g := NewWithT(t)
	in := CatalogInput{SystemNamespace: sysNS, TenantNamespace: "t", Groups: []string{"default"}}
	for i := 249; i >= 0; i-- { // unsorted input
		m := fmt.Sprintf("model-%03d", i)
		typ, profile := v1.ModelTypeImage, v1.ProfileImageEdit
		if i%5 == 0 {
			typ, profile = v1.ModelTypeVideo, v1.ProfileAllInOneVideo
		}
		in.Routes = append(in.Routes, route(sysNS, m, typ, profile, be{name: "b", ready: true}))
		in.Rules = append(in.Rules, published(sysNS, m, 0, perRequest(m, "0.01")))
	}
	seen := map[string]bool{}
	var pages []int
	q := CatalogQuery{Limit: 100}
	for {
		page, err := BuildCatalog(in, q)
		g.Expect(err).NotTo(HaveOccurred())
		pages = append(pages, len(page.Data))
		for _, it := range page.Data {
			g.Expect(seen).NotTo(HaveKey(it.ID), "repeated")
			seen[it.ID] = true
			g.Expect(it.Prices).To(HaveLen(1))
		}
		if !page.HasMore {
			g.Expect(page.NextAfter).To(BeEmpty())
			break
		}
		g.Expect(page.NextAfter).NotTo(BeEmpty())
		g.Expect(page.NextAfter).NotTo(ContainSubstring("model"), "opaque")
		q.After = page.NextAfter
	}
	g.Expect(pages).To(Equal([]int{100, 100, 50}))
	g.Expect(seen).To(HaveLen(250))

	// An exact multiple of the limit: the last full page says has_more false.
	page, err := BuildCatalog(in, CatalogQuery{Limit: 50, Type: "video"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).To(HaveLen(50))
	g.Expect(page.HasMore).To(BeFalse())

	// Type filter with pagination.
	page, err = BuildCatalog(in, CatalogQuery{Limit: 30, Type: "video"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).To(HaveLen(30))
	g.Expect(page.HasMore).To(BeTrue())
	g.Expect(page.Data[29].ID).To(Equal("model-145"))
	page, err = BuildCatalog(in, CatalogQuery{Limit: 30, Type: "video", After: page.NextAfter})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).To(HaveLen(20))
	g.Expect(page.Data[0].ID).To(Equal("model-150"))

	// The cursor does not need its model to still exist.
	page, err = BuildCatalog(in, CatalogQuery{Limit: 2, After: EncodeCursor("model-100x")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids(page)).To(Equal([]string{"model-101", "model-102"}))

	// Past the end.
	page, err = BuildCatalog(in, CatalogQuery{After: EncodeCursor("zzz")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).NotTo(BeNil())
	g.Expect(page.Data).To(BeEmpty())

	for _, q := range []CatalogQuery{{Limit: 101}, {Limit: -1}, {Type: "text"}, {After: "!!"}, {After: "bW9kZWw"}} {
		_, err := BuildCatalog(in, q)
		g.Expect(err).To(MatchError(ErrInvalidQuery), "%+v", q)
	}
}

func TestParseCatalogQuery(t *testing.T) {
	g := NewWithT(t)
	q, err := ParseCatalogQuery(url.Values{"model": {"m"}, "type": {"image"}, "limit": {"10"}, "after": {EncodeCursor("a")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(CatalogQuery{Model: "m", Type: "image", Limit: 10, After: EncodeCursor("a")}))
	q, err = ParseCatalogQuery(url.Values{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(CatalogQuery{}))
	for _, raw := range []string{"limit=0", "limit=101", "limit=abc", "limit=1.5", "type=text", "type=", "after=%21", "region=eu", "model=a&model=b"} {
		v, _ := url.ParseQuery(raw)
		_, err := ParseCatalogQuery(v)
		g.Expect(err).To(MatchError(ErrInvalidQuery), raw)
	}
}
