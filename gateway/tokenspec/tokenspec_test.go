package tokenspec

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

func token(spec v1.ApiTokenSpec) *v1.ApiToken {
	spec.DisplayName = "ci key"
	return &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team-a", UID: "uid-1"}, Spec: spec}
}

func TestForMapsTheWholeRegistration(t *testing.T) {
	cases := []struct {
		name string
		spec v1.ApiTokenSpec
		want store.TokenSpec
	}{
		{name: "no budget", spec: v1.ApiTokenSpec{},
			want: store.TokenSpec{RemainQuota: 0}},
		{name: "quota", spec: v1.ApiTokenSpec{Quota: ptr.To[int64](250000)},
			want: store.TokenSpec{RemainQuota: 250000}},
		{name: "credits: 200 credits = 1 USD = 500000 quota", spec: v1.ApiTokenSpec{Credits: ptr.To[v1.Decimal]("3")},
			want: store.TokenSpec{RemainQuota: 3 * billing.QuotaPerCredit}},
		{name: "fractional credits round half up to a whole unit", spec: v1.ApiTokenSpec{Credits: ptr.To[v1.Decimal]("0.0002")},
			want: store.TokenSpec{RemainQuota: 1}}, // 0.5 quota
		{name: "fractional credits below half a unit", spec: v1.ApiTokenSpec{Credits: ptr.To[v1.Decimal]("0.000199")},
			want: store.TokenSpec{RemainQuota: 0}}, // 0.4975 quota
		{name: "unlimited", spec: v1.ApiTokenSpec{UnlimitedQuota: true},
			want: store.TokenSpec{TokenLimits: store.TokenLimits{Unlimited: true}}},
		{name: "limits", spec: v1.ApiTokenSpec{Credits: ptr.To[v1.Decimal]("12.5"), DailyQuota: 1000, MonthlyQuota: 20000},
			want: store.TokenSpec{RemainQuota: 31250, TokenLimits: store.TokenLimits{DailyLimit: 1000, MonthlyLimit: 20000}}},
		{name: "unlimited with caps", spec: v1.ApiTokenSpec{Quota: ptr.To[int64](7), UnlimitedQuota: true, DailyQuota: 5},
			want: store.TokenSpec{RemainQuota: 7, TokenLimits: store.TokenLimits{Unlimited: true, DailyLimit: 5}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := For(token(c.spec), 42)
			g.Expect(err).NotTo(HaveOccurred())
			c.want.UID, c.want.UserID, c.want.Name = "uid-1", 42, "ci key"
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestForRefusesAnIncompleteRegistration(t *testing.T) {
	g := NewWithT(t)
	noUID := token(v1.ApiTokenSpec{Quota: ptr.To[int64](1)})
	noUID.UID = ""
	_, err := For(noUID, 42)
	g.Expect(err).To(MatchError(ContainSubstring("no UID")))

	_, err = For(token(v1.ApiTokenSpec{Quota: ptr.To[int64](1)}), 0)
	g.Expect(err).To(MatchError(ContainSubstring("no ledger user ID")))

	for name, spec := range map[string]v1.ApiTokenSpec{
		"both quota and credits": {Quota: ptr.To[int64](1), Credits: ptr.To[v1.Decimal]("1")},
		"malformed credits":      {Credits: ptr.To[v1.Decimal]("1e3")},
		"negative credits":       {Credits: ptr.To[v1.Decimal]("-1")},
		"negative quota":         {Quota: ptr.To[int64](-1)},
		"negative daily cap":     {DailyQuota: -1},
		"negative monthly cap":   {MonthlyQuota: -1},
	} {
		_, err := For(token(spec), 42)
		g.Expect(err).To(HaveOccurred(), name)
	}
}

// The gateway's authenticator and the controller see the same object, so
// they register the same token.
func TestForDependsOnlyOnTheObject(t *testing.T) {
	g := NewWithT(t)
	tok := token(v1.ApiTokenSpec{Credits: ptr.To[v1.Decimal]("0.03"), DailyQuota: 10})
	tok.Status.TokenID, tok.Status.RemainQuota = 0, 0 // the gateway's early view: status empty
	early, err := For(tok, 42)
	g.Expect(err).NotTo(HaveOccurred())
	tok.Status.UserID, tok.Status.KeyHash, tok.Status.RemainQuota = 42, "abc", 12 // the controller's later view
	late, err := For(tok, 42)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(late).To(Equal(early))
	g.Expect(early.RemainQuota).To(Equal(billing.Quota(75)))
}
