package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

func zapLevelWarn() zapcore.Level { return zapcore.WarnLevel }

// textModel declares a text model served by the given backends with a
// per-token price (3 USD in, 15 USD out per 1M tokens) and waits until the
// route is ready and the price is published.
func textModel(t testing.TB, ns, model string, backends ...v1.Backend) {
	t.Helper()
	textModelOn(t, stack.Env, ns, model, backends...)
}

// textModelOn is textModel on another control plane, whose controllers run
// elsewhere (a manager process).
func textModelOn(t testing.TB, env *framework.Env, ns, model string, backends ...v1.Backend) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: ns},
		Spec:       v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeText, MaxOutputTokens: 64000, Backends: backends},
	}
	out := v1.Decimal("15")
	price := &v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: ns},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out},
	}
	g.Expect(env.Client.Create(ctx, route)).To(Succeed())
	g.Expect(env.Client.Create(ctx, price)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), route)
		_ = env.Client.Delete(context.Background(), price)
	})
	g.Expect(env.WaitReady(ctx, route)).To(Succeed())
	g.Expect(env.WaitReady(ctx, price)).To(Succeed(), "published")
	if env == stack.Env { // this process's gateway: wait until its cache has both
		g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
		g.Expect(stack.WaitCached(ctx, price)).To(Succeed())
	}
}

func sim(name, provider string) v1.Backend {
	return v1.Backend{Name: name, Provider: provider, Weight: 1, Groups: []v1.GroupName{"default"}}
}

// newAccount makes a tenant with credits and a key with quota.
func newAccount(t testing.TB, tenant v1.TenantSpec, token v1.ApiTokenSpec) *framework.Account {
	t.Helper()
	return newAccountOn(t, stack.Env, tenant, token)
}

// newAccountOn is newAccount on another control plane: 1 000 credits (5 USD)
// and a 5 USD key unless the specs say otherwise.
func newAccountOn(t testing.TB, env *framework.Env, tenant v1.TenantSpec, token v1.ApiTokenSpec) *framework.Account {
	t.Helper()
	if len(tenant.Grants) == 0 {
		c := v1.Decimal("1000")
		tenant.Grants = []v1.Grant{{ID: "g", Credits: &c}}
	}
	if token.Quota == nil && !token.UnlimitedQuota {
		q := int64(5 * billing.QuotaPerUSD)
		token.Quota = &q
	}
	a, err := newAccountIn(t, env, tenant, token)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return a
}

// newAccountIn puts a spec's first account on this stack in the spec's
// namespace and each further one in a namespace of its own, deleted when the
// spec ends. A plain Test (not a spec) and other control planes get a
// namespace per account, as before the suite.
func newAccountIn(t testing.TB, env *framework.Env, tenant v1.TenantSpec, token v1.ApiTokenSpec) (*framework.Account, error) {
	ctx := context.Background()
	if _, spec := t.(*GinkgoTBWrapper); !spec || env != stack.Env || specNamespace == "" {
		return env.NewAccount(ctx, tenant, token)
	}
	specAccounts++
	if specAccounts == 1 {
		return env.NewAccountIn(ctx, specNamespace, tenant, token)
	}
	a, err := env.NewAccount(ctx, tenant, token)
	if a != nil {
		deleteNamespaceAfterSpec(a.Namespace)
	}
	return a, err
}

// usedQuota waits until the usage writer flushed and returns the token's
// used quota and the sum of its usage rows' quota: the two must agree.
func usedQuota(t testing.TB, a *framework.Account, wantRows int) (used, rowSum billing.Quota) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		rows, err := stack.Ledger.SummarizeUsage(ctx, usageWindow(a))
		g.Expect(err).NotTo(HaveOccurred())
		var n int64
		rowSum = 0
		for _, r := range rows.Rows {
			n += r.RequestCount
			rowSum += r.Quota
		}
		g.Expect(n).To(BeNumerically("==", wantRows))
		b, err := stack.Ledger.TokenUsage(ctx, a.Token.Status.TokenID)
		g.Expect(err).NotTo(HaveOccurred())
		used = b.Used
		g.Expect(used).To(Equal(rowSum), "the ledger's used quota equals the sum of the usage rows")
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	return used, rowSum
}

func uniqueModel(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

func usageWindow(a *framework.Account) store.UsageQuery {
	now := time.Now().Unix()
	return store.UsageQuery{UserID: a.Tenant.Status.UserID, Start: now - 3600, End: now + 3600, PageSize: 100}
}
