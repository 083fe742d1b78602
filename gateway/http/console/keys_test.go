package console_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// TestKeyRequest drives the shared key request (tokenspec.Plan, the rules
// POST /v1/tokens applies too) from the console's form, with the account as
// the creator.
func TestKeyRequest(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tenant := &v1.Tenant{Spec: v1.TenantSpec{AllowedGroups: []v1.GroupName{"vip"}}}
	limited := tokenspec.Bounds{Remain: billing.Quota(1_000_000)} // 400 credits left
	capped := tokenspec.Bounds{Unlimited: true, Monthly: 5000, ModelLimitsEnabled: true, ModelLimits: []v1.ModelID{"a", "b"}}
	for _, tc := range []struct {
		name    string
		form    console.KeyForm
		bounds  tokenspec.Bounds
		formErr bool
		refused tokenspec.Reason
		check   func(g Gomega, req tokenspec.Request)
	}{
		{name: "a key within the balance", form: console.KeyForm{Name: "ci", Credits: "100", Monthly: "20", RPM: "60", TPM: "1000",
			Models: "a, b", Group: "vip", Expires: "2027-01-01T00:00"}, bounds: limited,
			check: func(g Gomega, req tokenspec.Request) {
				g.Expect(req.Quota).To(Equal(billing.Quota(250_000)))
				g.Expect(req.Monthly).To(Equal(billing.Quota(50_000)))
				g.Expect(req.RequestsPerMinute).To(Equal(int32(60)))
				g.Expect(req.TokensPerMinute).To(Equal(int64(1000)))
				g.Expect(req.ModelLimitsEnabled).To(BeTrue())
				g.Expect(req.ModelLimits).To(Equal([]v1.ModelID{"a", "b"}))
				g.Expect(*req.ExpiresAt).To(Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)))
			}},
		{name: "more credits than the account has left", form: console.KeyForm{Name: "big", Credits: "401"}, bounds: limited, refused: tokenspec.ExceedsQuota},
		{name: "unlimited from a limited account", form: console.KeyForm{Name: "u", Unlimited: true}, bounds: limited, refused: tokenspec.ExceedsUnlimited},
		{name: "unlimited from an unlimited account", form: console.KeyForm{Name: "u", Unlimited: true}, bounds: tokenspec.Bounds{Unlimited: true},
			check: func(g Gomega, req tokenspec.Request) { g.Expect(req.Unlimited).To(BeTrue()) }},
		{name: "no name", form: console.KeyForm{Name: " "}, bounds: limited, refused: tokenspec.NameRequired},
		{name: "a name of 51 characters", form: console.KeyForm{Name: "123456789012345678901234567890123456789012345678901"}, bounds: limited, refused: tokenspec.NameTooLong},
		{name: "an expiry in the past", form: console.KeyForm{Name: "old", Expires: "2026-12-01T00:00"}, bounds: limited, refused: tokenspec.ExpiresInPast},
		{name: "a group the tenant does not allow", form: console.KeyForm{Name: "g", Group: "gold"}, bounds: limited, refused: tokenspec.GroupNotAllowed},
		{name: "the automatic group", form: console.KeyForm{Name: "g", Group: "auto"}, bounds: limited},
		{name: "credits that are not a number", form: console.KeyForm{Name: "n", Credits: "ten"}, bounds: limited, formErr: true},
		{name: "negative credits", form: console.KeyForm{Name: "n", Credits: "-1"}, bounds: limited, formErr: true},
		{name: "a negative rate", form: console.KeyForm{Name: "n", RPM: "-5"}, bounds: limited, formErr: true},
		{name: "a creator's monthly cap and models are inherited", form: console.KeyForm{Name: "child"}, bounds: capped,
			check: func(g Gomega, req tokenspec.Request) {
				g.Expect(req.Monthly).To(Equal(billing.Quota(5000)))
				g.Expect(req.ModelLimits).To(Equal([]v1.ModelID{"a", "b"}))
			}},
		{name: "a looser monthly cap than the creator's", form: console.KeyForm{Name: "child", Monthly: "3"}, bounds: capped, refused: tokenspec.ExceedsMonthly},
		{name: "a model outside the creator's list", form: console.KeyForm{Name: "child", Models: "c"}, bounds: capped, refused: tokenspec.ExceedsModels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req, msg := tc.form.Request()
			if tc.formErr {
				g.Expect(msg).NotTo(BeEmpty())
				return
			}
			g.Expect(msg).To(BeEmpty())
			granted, refused := tokenspec.Plan(req, tenant, tc.bounds, now)
			g.Expect(refused).To(Equal(tc.refused))
			if tc.check != nil {
				tc.check(g, granted)
			}
			if refused == "" {
				tok := tokenspec.NewApiToken(granted, "acme", "sk-abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdef",
					map[string]string{console.ManagedByLabel: console.ManagedByConsole})
				g.Expect(tok.Labels).To(HaveKeyWithValue("modelgate.io/managed-by", "console"))
				g.Expect(tok.Spec.KeyHash).NotTo(BeEmpty())
				g.Expect(tok.Spec.MonthlyQuota).To(Equal(int64(granted.Monthly)))
				g.Expect(tok.Finalizers).To(ContainElement(v1.LedgerFinalizer))
			}
		})
	}
}
