package pricing

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

func withCond(s v1.PriceRuleSpec, c *v1.PriceConditions) v1.PriceRuleSpec {
	s.Conditions = c
	return s
}

func withGroup(s v1.PriceRuleSpec, g string) v1.PriceRuleSpec {
	s.Group = v1.GroupName(g)
	return s
}

func TestSelectSpecificity(t *testing.T) {
	base := perSecond("vid", "0.01")
	table := NewTable(sysNS, []v1.PriceRule{
		published(sysNS, "any", 0, base),
		published(sysNS, "hd", 1, withCond(perSecond("vid", "0.02"), res("1080p"))),
		published(sysNS, "hd-video", 2, withCond(perSecond("vid", "0.03"), resVid("1080p", true))),
		published(sysNS, "video", 3, withCond(perSecond("vid", "0.04"), vid(true))),
		published(sysNS, "vip", 4, withGroup(perSecond("vid", "0.05"), "vip")),
		published(sysNS, "other-model", 5, perSecond("other", "0.06")),
	})
	tests := []struct {
		group string
		facts Facts
		want  string
	}{
		{"default", Facts{Resolution: "1080p", HasVideoInput: true}, "hd-video"},
		{"default", Facts{Resolution: "1080p"}, "hd"},
		{"default", Facts{Resolution: "1080P"}, "hd"}, // resolution compares case-insensitively
		{"default", Facts{Resolution: "720p", HasVideoInput: true}, "video"},
		{"default", Facts{Resolution: "720p"}, "any"},
		{"default", Facts{}, "any"},
		{"vip", Facts{Resolution: "1080p", HasVideoInput: true}, "vip"},
	}
	for _, tc := range tests {
		g := NewWithT(t)
		r, err := table.Select("tenant-a", "vid", tc.group, tc.facts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Name).To(Equal(tc.want), "%s %+v", tc.group, tc.facts)
	}
	_, err := table.Select("tenant-a", "vid", "gold", Facts{})
	NewWithT(t).Expect(err).To(MatchError(ErrNoPrice))
	_, err = table.Select("tenant-a", "nope", "default", Facts{})
	NewWithT(t).Expect(err).To(MatchError(ErrNoPrice))
}

func TestSelectTieBreak(t *testing.T) {
	g := NewWithT(t)
	// Equal specificity, both match 1080p with video input: a conflict the
	// controller should reject; the evaluator is still deterministic.
	older := published(sysNS, "zz-older", 0, withCond(perSecond("vid", "1"), res("1080p")))
	newer := published(sysNS, "aa-newer", 5, withCond(perSecond("vid", "2"), vid(true)))
	facts := Facts{Resolution: "1080p", HasVideoInput: true}
	for _, order := range [][]v1.PriceRule{{older, newer}, {newer, older}} {
		r, err := NewTable(sysNS, order).Select("t", "vid", "default", facts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Name).To(Equal("zz-older"))
	}
	sameA := published(sysNS, "b", 0, withCond(perSecond("vid", "1"), res("1080p")))
	sameB := published(sysNS, "a", 0, withCond(perSecond("vid", "2"), vid(true)))
	for _, order := range [][]v1.PriceRule{{sameA, sameB}, {sameB, sameA}} {
		r, err := NewTable(sysNS, order).Select("t", "vid", "default", facts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Name).To(Equal("a"), "same creation time: by name")
	}
}

func TestCustomerPriceOverridesPlatformPrice(t *testing.T) {
	g := NewWithT(t)
	rules := []v1.PriceRule{
		published(sysNS, "public", 0, perRequest("img", "0.03")),
		published(sysNS, "public-2k", 0, withCond(perRequest("img", "0.05"), res("2K"))),
		published("tenant-a", "customer", 10, perRequest("img", "0.02")),
		published("tenant-b", "customer", 10, perRequest("img", "0.01")),
		published("tenant-a", "customer-video", 10, withCond(perRequest("img", "0.04"), vid(true))),
	}
	table := NewTable(sysNS, rules)
	charge := func(ns string, f Facts) (string, billing.Quota) {
		r, err := table.Select(ns, "img", "default", f)
		g.Expect(err).NotTo(HaveOccurred())
		q, err := r.Charge(Usage{Requests: 1}, t0)
		g.Expect(err).NotTo(HaveOccurred())
		return r.Key(), q
	}
	key, q := charge("tenant-a", Facts{})
	g.Expect(key).To(Equal("tenant-a/customer"))
	g.Expect(q).To(Equal(billing.Quota(10000)))
	key, q = charge("tenant-b", Facts{})
	g.Expect(key).To(Equal("tenant-b/customer"))
	g.Expect(q).To(Equal(billing.Quota(5000)))
	key, _ = charge("tenant-c", Facts{})
	g.Expect(key).To(Equal(sysNS + "/public"))
	// The tenant's rule without conditions replaces only the platform rule
	// without conditions; the more specific platform 2K price still applies.
	key, _ = charge("tenant-a", Facts{Resolution: "2K"})
	g.Expect(key).To(Equal(sysNS + "/public-2k"))
	// Equal specificity between a tenant and a platform rule: the customer price.
	key, _ = charge("tenant-a", Facts{Resolution: "2K", HasVideoInput: true})
	g.Expect(key).To(Equal("tenant-a/customer-video"))

	// The package-level Select over the visible rules agrees.
	var visible []*Rule
	for i := range rules {
		if rules[i].Namespace == sysNS || rules[i].Namespace == "tenant-a" {
			r, err := Compile(&rules[i], sysNS)
			g.Expect(err).NotTo(HaveOccurred())
			visible = append(visible, r)
		}
	}
	r, err := Select(visible, "img", "default", Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Key()).To(Equal("tenant-a/customer"))
	names := []string{}
	for _, r := range Visible(visible, "img", "default") {
		names = append(names, r.Key())
	}
	g.Expect(names).To(Equal([]string{"tenant-a/customer-video", sysNS + "/public-2k", "tenant-a/customer"}))

	// One call: select and quote.
	b, err := table.Quote(Request{TenantNamespace: "tenant-a", Model: "img", Group: "default", Usage: Usage{Requests: 2}, At: t0})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Quota).To(Equal(billing.Quota(20000)))
}

func TestTableOnlyPublishedRules(t *testing.T) {
	g := NewWithT(t)
	unpublished := published(sysNS, "draft", 0, perRequest("img", "0.01"))
	unpublished.Status.Conditions[1].Status = metav1.ConditionFalse
	stale := published(sysNS, "stale", 0, perRequest("img", "0.01"))
	stale.Generation = 2 // spec changed, not validated yet
	deleting := published(sysNS, "deleting", 0, perRequest("img", "0.01"))
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	noCondition := published(sysNS, "new", 0, perRequest("img", "0.01"))
	noCondition.Status = v1.PriceRuleStatus{}
	statusGen := published(sysNS, "status-gen", 0, perRequest("img2", "0.01"))
	statusGen.Status.Conditions[1].ObservedGeneration = 0

	for _, pr := range []v1.PriceRule{unpublished, stale, deleting, noCondition} {
		g.Expect(IsPublished(&pr)).To(BeFalse(), pr.Name)
	}
	g.Expect(IsPublished(&statusGen)).To(BeTrue())
	_, err := NewTable(sysNS, []v1.PriceRule{unpublished, stale, deleting, noCondition}).Select("t", "img", "default", Facts{})
	g.Expect(err).To(MatchError(ErrNoPrice))
}

func TestTableBrokenRuleIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	broken := perRequest("img", "0.02")
	broken.Timezone = "Nowhere/Nothing"
	table := NewTable(sysNS, []v1.PriceRule{
		published(sysNS, "public", 0, perRequest("img", "0.03")),
		published("tenant-a", "customer", 0, broken),
	})
	// Never fall back to the public price when the customer price is broken.
	_, err := table.Select("tenant-a", "img", "default", Facts{})
	g.Expect(err).To(MatchError(ErrPriceUnavailable))
	r, err := table.Select("tenant-b", "img", "default", Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Name).To(Equal("public"))
}

func TestOverlaps(t *testing.T) {
	spec := func(model, group string, c *v1.PriceConditions) v1.PriceRuleSpec {
		return withGroup(withCond(perSecond(model, "1"), c), group)
	}
	tests := []struct {
		name string
		a, b v1.PriceRuleSpec
		want bool
	}{
		{"same model, group, no conditions", spec("m", "", nil), spec("m", "default", nil), true},
		{"empty conditions object equals none", spec("m", "", &v1.PriceConditions{}), spec("m", "", nil), true},
		{"different model", spec("m", "", nil), spec("n", "", nil), false},
		{"different group", spec("m", "", nil), spec("m", "vip", nil), false},
		{"same resolution", spec("m", "", res("1080p")), spec("m", "", res("1080P")), true},
		{"different resolution", spec("m", "", res("1080p")), spec("m", "", res("720p")), false},
		{"more specific does not conflict", spec("m", "", nil), spec("m", "", res("1080p")), false},
		{"two conditions vs one", spec("m", "", resVid("1080p", true)), spec("m", "", res("1080p")), false},
		{"resolution vs video input: both match 1080p+video", spec("m", "", res("1080p")), spec("m", "", vid(true)), true},
		{"video true vs false", spec("m", "", vid(true)), spec("m", "", vid(false)), false},
		{"same two conditions", spec("m", "", resVid("720p", false)), spec("m", "", resVid("720p", false)), true},
		{"two conditions, different video", spec("m", "", resVid("720p", false)), spec("m", "", resVid("720p", true)), false},
		{"different charge types still conflict", spec("m", "", nil), perRequest("m", "1"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Overlaps(tc.a, tc.b)).To(Equal(tc.want))
			g.Expect(Overlaps(tc.b, tc.a)).To(Equal(tc.want), "symmetric")
		})
	}
}
