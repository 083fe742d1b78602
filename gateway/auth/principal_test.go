package auth_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
)

func principal(tokenGroup string, crossGroup bool, tenantGroup string, allowed ...v1.GroupName) *auth.Principal {
	return &auth.Principal{
		Token:  &v1.ApiToken{Spec: v1.ApiTokenSpec{Group: tokenGroup, CrossGroupRetry: crossGroup}},
		Tenant: &v1.Tenant{Spec: v1.TenantSpec{Group: v1.GroupName(tenantGroup), AllowedGroups: allowed}},
	}
}

func TestGroups(t *testing.T) {
	g := NewWithT(t)
	g.Expect(principal("", false, "").Groups()).To(Equal([]string{"default"}))
	g.Expect(principal("", false, "gold").Groups()).To(Equal([]string{"gold"}))
	g.Expect(principal("vip", false, "gold", "vip").Groups()).To(Equal([]string{"vip"}))
	g.Expect(principal("vip", true, "gold", "vip", "cheap").Groups()).To(Equal([]string{"vip", "gold", "cheap"}))
	g.Expect(principal("auto", false, "gold", "vip").Groups()).To(Equal([]string{"gold", "vip"}))
	g.Expect(principal("auto", false, "").Groups()).To(Equal([]string{"default"}))
	g.Expect(principal("vip", true, "gold", "vip").AllowsGroup("gold")).To(BeTrue())
	g.Expect(principal("vip", false, "gold", "vip").AllowsGroup("gold")).To(BeFalse())
}

func TestModelAllowList(t *testing.T) {
	g := NewWithT(t)
	p := principal("", false, "")
	g.Expect(p.AllowsModel("anything")).To(BeTrue(), "no list: everything")
	p.Token.Spec.ModelLimits = []v1.ModelID{"a"}
	g.Expect(p.AllowsModel("b")).To(BeTrue(), "a list that is not enabled does not apply")
	p.Token.Spec.ModelLimitsEnabled = true
	g.Expect(p.AllowsModel("a")).To(BeTrue())
	g.Expect(p.AllowsModel("b")).To(BeFalse())
}

func TestCredentialExtraction(t *testing.T) {
	g := NewWithT(t)
	r, _ := http.NewRequest("GET", "/", nil)
	g.Expect(auth.Credential(r, true)).To(BeEmpty())
	r.Header.Set("x-api-key", "sk-abc")
	g.Expect(auth.Credential(r, false)).To(BeEmpty(), "x-api-key only where allowed")
	g.Expect(auth.Credential(r, true)).To(Equal("sk-abc"))
	r.Header.Set("Authorization", "bearer  xyz ")
	g.Expect(auth.Credential(r, true)).To(Equal("sk-xyz"), "Bearer wins, case-insensitive, prefix added")
	r.Header.Set("Authorization", "Basic abc")
	g.Expect(auth.Credential(r, false)).To(BeEmpty())
}
