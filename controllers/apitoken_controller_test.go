package controllers_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/tokenspec"
	"github.com/modelgate/modelgate/test/framework"
)

func readyToken(tok *v1.ApiToken) *v1.ApiToken {
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), tok)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tok.Status.Conditions, v1.ConditionReady)).To(BeTrue())
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return tok
}

var _ = Describe("ApiToken controller", func() {
	var ns string
	var tenant *v1.Tenant

	BeforeEach(func() {
		ns = newTenantNamespace()
		tenant = readyTenantIn(ns, v1.Grant{ID: "g", Credits: credits("100")})
	})

	It("generates a key once, stores only its hash and registers the token", func() {
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "ci key", Quota: ptr.To[int64](250000)}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		readyToken(tok)

		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: tok.Status.SecretName}, secret)).To(Succeed())
		key := string(secret.Data[v1.APIKeySecretKey])
		Expect(keys.ValidAPIKey(key)).To(BeTrue(), "key %q", key)
		Expect(tok.Status.KeyHash).To(Equal(keys.Hash(key)))
		Expect(tok.Status.KeyPrefix).To(Equal(key[:7]))
		Expect(tok.Status.TokenID).To(BeNumerically(">", 0))
		Expect(tok.Status.UserID).To(Equal(tenant.Status.UserID))
		Expect(tok.Status.State).To(Equal(v1.TokenEnabled))
		Expect(tok.Status.RemainQuota).To(Equal(int64(250000)))

		By("never putting the key itself in status")
		raw, err := k8sJSON(tok)
		Expect(err).NotTo(HaveOccurred())
		Expect(raw).NotTo(ContainSubstring(key))

		By("leaving the key and ID alone on later reconciles (GitOps re-apply)")
		update(tok, func(t *v1.ApiToken) { t.Spec.DisplayName = "ci key renamed" })
		Consistently(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), s)).To(Succeed())
			g.Expect(string(s.Data[v1.APIKeySecretKey])).To(Equal(key))
			got := &v1.ApiToken{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), got)).To(Succeed())
			g.Expect(got.Status.TokenID).To(Equal(tok.Status.TokenID))
			g.Expect(got.Status.KeyHash).To(Equal(tok.Status.KeyHash))
		}, framework.ConsistentlyDuration, framework.Interval).Should(Succeed())
	})

	It("uses a key from a referenced Secret and reports a malformed one", func() {
		key, err := keys.NewAPIKey()
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns},
			StringData: map[string]string{"apiKey": key, "bad": "sk-short"}})).To(Succeed())

		good := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "byo", Namespace: ns}, Spec: v1.ApiTokenSpec{
			DisplayName: "bring your own", KeySecretRef: &v1.SecretKeyRef{Name: "mine", Key: "apiKey"}}}
		Expect(k8s.Create(ctx, good)).To(Succeed())
		readyToken(good)
		Expect(good.Status.KeyHash).To(Equal(keys.Hash(key)))

		bad := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "typo", Namespace: ns}, Spec: v1.ApiTokenSpec{
			DisplayName: "typo", KeySecretRef: &v1.SecretKeyRef{Name: "mine", Key: "bad"}}}
		Expect(k8s.Create(ctx, bad)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
			c := meta.FindStatusCondition(bad.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonKeyInvalid))
			g.Expect(c.Message).NotTo(ContainSubstring("sk-short"))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(bad.Status.KeyHash).To(BeEmpty())

		By("naming the step that failed and the ones it held up")
		provisioned := meta.FindStatusCondition(bad.Status.Conditions, v1.ConditionKeyProvisioned)
		Expect(provisioned).NotTo(BeNil())
		Expect(provisioned.Status).To(Equal(metav1.ConditionFalse))
		Expect(provisioned.Reason).To(Equal(v1.ReasonKeyInvalid))
		Expect(provisioned.Message).To(Equal(`secret mine key "bad" is not an API key (sk- and 48 letters or digits)`))
		registered := meta.FindStatusCondition(bad.Status.Conditions, v1.ConditionRegistered)
		Expect(registered).NotTo(BeNil())
		Expect(registered.Status).To(Equal(metav1.ConditionFalse))
		Expect(registered.Reason).To(Equal(v1.ReasonBlocked))
		Expect(registered.Message).To(Equal("not attempted: KeyProvisioned is False (KeyInvalid)"))
		for _, c := range []string{v1.ConditionKeyProvisioned, v1.ConditionRegistered, v1.ConditionUsageMirrored} {
			Expect(meta.IsStatusConditionTrue(good.Status.Conditions, c)).To(BeTrue(), c)
		}
	})

	It("computes disabled, expired and exhausted states and requeues at expiry", func() {
		disabled := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "off", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "off", Disabled: true, Quota: ptr.To[int64](1)}}
		empty := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "empty"}}
		spent := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "spent", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "spent", Quota: ptr.To[int64](1000)}}
		soon := metav1.NewTime(time.Now().Add(3 * time.Second).Truncate(time.Second))
		expiring := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "expiring", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "expiring", ExpiresAt: &soon, UnlimitedQuota: true}}
		for _, t := range []*v1.ApiToken{disabled, empty, spent, expiring} {
			Expect(k8s.Create(ctx, t)).To(Succeed())
		}
		Expect(readyToken(disabled).Status.State).To(Equal(v1.TokenDisabled))
		// A key made without quota is enabled (each request is refused for
		// quota); a key that spent its quota is exhausted.
		Expect(readyToken(empty).Status.State).To(Equal(v1.TokenEnabled))
		Expect(readyToken(spent).Status.State).To(Equal(v1.TokenEnabled))
		Expect(ledger.Reserve(ctx, "spend-"+ns, spent.Status.TokenID, spent.Status.UserID, 1000)).To(Succeed())
		Expect(ledger.Settle(ctx, "spend-"+ns, 1000)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(spent), spent)).To(Succeed())
			g.Expect(spent.Status.State).To(Equal(v1.TokenExhausted))
			g.Expect(spent.Status.UsedQuota).To(Equal(int64(1000)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(readyToken(expiring).Status.State).To(Equal(v1.TokenEnabled))
		// No spec change or watch event happens at the expiry: only the
		// controller's own requeue can move the state.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(expiring), expiring)).To(Succeed())
			g.Expect(expiring.Status.State).To(Equal(v1.TokenExpired))
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("an idle key's status is not rewritten every sync period (1 s here)")
		idle := readyToken(empty)
		Eventually(func(g Gomega) { // its first mirror is written once
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(empty), idle)).To(Succeed())
			g.Expect(idle.Status.UsageSyncedAt).NotTo(BeNil())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		expectNotRewritten(idle)
	})

	It("keeps the gateway's registration when the gateway registers the key first, credits included", func() {
		key, err := keys.NewAPIKey()
		Expect(err).NotTo(HaveOccurred())
		// The key's Secret is missing, so the controller stops before the
		// ledger (KeyInvalid) and the gateway gets there first.
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "race", Namespace: ns}, Spec: v1.ApiTokenSpec{
			DisplayName: "race", KeySecretRef: &v1.SecretKeyRef{Name: "later", Key: "apiKey"},
			Credits: credits("3"), DailyQuota: 5000}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), tok)).To(Succeed())
			c := meta.FindStatusCondition(tok.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonKeyInvalid))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(tok.Status.TokenID).To(BeZero())

		By("registering the token as the gateway's authenticator does, from its cached object")
		spec, err := tokenspec.For(tok, tenant.Status.UserID)
		Expect(err).NotTo(HaveOccurred())
		id, err := ledger.EnsureToken(ctx, spec)
		Expect(err).NotTo(HaveOccurred())
		b, err := ledger.TokenUsage(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Remain).To(Equal(billing.Quota(7500)), "3 credits")

		By("letting the controller register it second: same ID, same starting balance")
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "now", Namespace: ns},
			StringData: map[string]string{"apiKey": key}})).To(Succeed())
		update(tok, func(t *v1.ApiToken) { t.Spec.KeySecretRef = &v1.SecretKeyRef{Name: "now", Key: "apiKey"} })
		readyToken(tok)
		Expect(tok.Status.TokenID).To(Equal(id))
		Expect(tok.Status.RemainQuota).To(Equal(int64(7500)))
		b, err = ledger.TokenUsage(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Remain).To(Equal(billing.Quota(7500)))
	})

	It("waits for the namespace's Tenant", func() {
		lonely := framework.NewNamespace("no-tenant")
		Expect(k8s.Create(ctx, lonely)).To(Succeed())
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: lonely.Name},
			Spec: v1.ApiTokenSpec{DisplayName: "early"}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), tok)).To(Succeed())
			c := meta.FindStatusCondition(tok.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonTenantNotReady))
			key := meta.FindStatusCondition(tok.Status.Conditions, v1.ConditionKeyProvisioned)
			g.Expect(key).NotTo(BeNil())
			g.Expect(key.Reason).To(Equal(v1.ReasonBlocked))
			g.Expect(key.Message).To(Equal("not attempted: no ready Tenant in namespace " + lonely.Name))
		}, framework.Timeout, framework.Interval).Should(Succeed())

		readyTenantIn(lonely.Name)
		readyToken(tok)
		Expect(strings.HasPrefix(tok.Status.KeyPrefix, "sk-")).To(BeTrue())
	})
})
