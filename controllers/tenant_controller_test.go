package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

// newTenantNamespace creates a fresh namespace for one spec.
func newTenantNamespace() string {
	ns := framework.NewNamespace("tenant")
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed()) })
	return ns.Name
}

func readyTenantIn(ns string, grants ...v1.Grant) *v1.Tenant {
	t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns}, Spec: v1.TenantSpec{Grants: grants}}
	Expect(k8s.Create(ctx, t)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue())
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return t
}

func credits(s string) *v1.Decimal { d := v1.Decimal(s); return &d }

var _ = Describe("Tenant controller", func() {
	DescribeTable("says whether the webhook URL may be called, naming no address",
		func(url string, ready metav1.ConditionStatus, reason string) {
			ns := newTenantNamespace()
			t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns}, Spec: v1.TenantSpec{
				Webhook: &v1.WebhookSpec{URL: url, SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}}}
			Expect(k8s.Create(ctx, t)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
				cond := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionWebhookReady)
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Status).To(Equal(ready))
				g.Expect(cond.Reason).To(Equal(reason))
				g.Expect(cond.Message).NotTo(Or(ContainSubstring("169.254"), ContainSubstring("10.0.0"), ContainSubstring("127.0.0.2")))
				g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue(), "the tenant itself still works")
			}, framework.Timeout, framework.Interval).Should(Succeed())
		},
		Entry("cloud metadata", "http://169.254.169.254/latest/meta-data", metav1.ConditionFalse, v1.ReasonForbiddenAddress),
		Entry("a private address", "https://10.0.0.7/hooks", metav1.ConditionFalse, v1.ReasonForbiddenAddress),
		Entry("loopback outside the allow-list", "http://127.0.0.2:19400/hook", metav1.ConditionFalse, v1.ReasonForbiddenAddress),
		Entry("IPv4-mapped IPv6 loopback", "http://[::ffff:127.0.0.2]/hook", metav1.ConditionFalse, v1.ReasonForbiddenAddress),
		Entry("a public address", "https://93.184.216.34/hooks", metav1.ConditionTrue, v1.ReasonReconciled),
	)

	It("registers the tenant, applies each grant once and keeps an access token", func() {
		ns := newTenantNamespace()
		t := readyTenantIn(ns, v1.Grant{ID: "welcome", Credits: credits("200")}, v1.Grant{ID: "bonus", Quota: ptr.To[int64](1000)})

		Expect(t.Status.UserID).To(BeNumerically(">", 0))
		Expect(t.Status.AppliedGrants).To(ConsistOf("welcome", "bonus"))
		Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
		for _, c := range []string{v1.ConditionRegistered, v1.ConditionGrantsApplied, v1.ConditionAccessTokenReady} {
			Expect(meta.IsStatusConditionTrue(t.Status.Conditions, c)).To(BeTrue(), c)
		}
		bal, err := ledger.TenantBalance(ctx, t.Status.UserID)
		Expect(err).NotTo(HaveOccurred())
		Expect(bal.Remain).To(Equal(billing.Quota(500000 + 1000))) // 200 credits = 1 USD

		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Status.AccessTokenSecretName}, secret)).To(Succeed())
		token := string(secret.Data[v1.AccessTokenSecretKey])
		Expect(token).To(HaveLen(40))
		Expect(t.Status.AccessTokenHash).To(Equal(keys.Hash(token)))
		Expect(secret.OwnerReferences).To(HaveLen(1))
		Expect(secret.OwnerReferences[0].UID).To(Equal(t.UID))

		By("removing a grant from the spec, which does not take the quota back")
		update(t, func(t *v1.Tenant) { t.Spec.Grants = t.Spec.Grants[:1] })
		Consistently(func(g Gomega) {
			b, err := ledger.TenantBalance(ctx, t.Status.UserID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Remain).To(Equal(billing.Quota(501000)))
		}, framework.ConsistentlyDuration, framework.Interval).Should(Succeed())

		By("adding a new grant, which is applied once")
		update(t, func(t *v1.Tenant) {
			t.Spec.Grants = append(t.Spec.Grants, v1.Grant{ID: "topup", Quota: ptr.To[int64](7)})
		})
		Eventually(func(g Gomega) {
			b, err := ledger.TenantBalance(ctx, t.Status.UserID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Remain).To(Equal(billing.Quota(501007)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.RemainQuota).To(Equal(int64(501007)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("does not rewrite an idle tenant's status every sync period (1 s here)", func() {
		ns := newTenantNamespace()
		t := readyTenantIn(ns, v1.Grant{ID: "welcome", Quota: ptr.To[int64](1000)})
		Eventually(func(g Gomega) { // the first mirror is written once
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.BalanceSyncedAt).NotTo(BeNil())
			g.Expect(t.Status.RemainQuota).To(Equal(int64(1000)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		expectNotRewritten(t)

		By("a figure that moves is mirrored within a period")
		tokenID, err := ledger.EnsureToken(ctx, store.TokenSpec{UID: "idle-" + ns, UserID: t.Status.UserID, Name: "spender", TokenLimits: store.TokenLimits{Unlimited: true}})
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger.Reserve(ctx, "idle-"+ns, tokenID, t.Status.UserID, 100)).To(Succeed())
		Expect(ledger.Settle(ctx, "idle-"+ns, 100)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.UsedQuota).To(Equal(int64(100)))
			g.Expect(t.Status.RemainQuota).To(Equal(int64(900)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("records Events for registration, each grant and a new key", func() {
		ns := newTenantNamespace()
		t := readyTenantIn(ns, v1.Grant{ID: "welcome", Quota: ptr.To[int64](1000)})
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns}, Spec: v1.ApiTokenSpec{DisplayName: "k"}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		// reasons lists "<kind>/<name> <type> <reason>: <note>" of the namespace's Events.
		reasons := func(g Gomega) []string {
			list := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var out []string
			for _, e := range list.Items {
				out = append(out, e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Type+" "+e.Reason+": "+e.Note)
			}
			return out
		}
		Eventually(func(g Gomega) {
			got := reasons(g)
			g.Expect(got).To(ContainElement(HavePrefix("Tenant/" + t.Name + " Normal " + v1.EventTenantRegistered + ": registered in the ledger as user")))
			g.Expect(got).To(ContainElement("Tenant/" + t.Name + " Normal " + v1.EventGrantApplied + ": grant welcome added 1000 quota"))
			g.Expect(got).To(ContainElement(HavePrefix("ApiToken/key Normal " + v1.EventKeyProvisioned + ": generated a new key into Secret key-key")))
			g.Expect(got).To(ContainElement(HavePrefix("ApiToken/key Normal " + v1.EventTokenRegistered + ": registered in the ledger as token")))
			for _, e := range got {
				g.Expect(e).NotTo(ContainSubstring("sk-"), "an Event never carries a key")
			}
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("rotates the access token on request and invalidates the old one", func() {
		ns := newTenantNamespace()
		t := readyTenantIn(ns)
		oldHash := t.Status.AccessTokenHash

		update(t, func(t *v1.Tenant) { t.Spec.AccessTokenRotation = 1 })
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.AccessTokenRotation).To(Equal(int64(1)))
			g.Expect(t.Status.AccessTokenHash).NotTo(Equal(oldHash))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Status.AccessTokenSecretName}, secret)).To(Succeed())
		Expect(keys.Hash(string(secret.Data[v1.AccessTokenSecretKey]))).To(Equal(t.Status.AccessTokenHash))
	})

	It("keeps the access token it handed out when it reads a Tenant whose status lost it", func() {
		// A reconcile can read a Tenant older than its own last status write
		// (the cache lags); it must adopt the token in the Secret, not replace
		// a token a client may already hold.
		ns := newTenantNamespace()
		t := readyTenantIn(ns)
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Status.AccessTokenSecretName}, secret)).To(Succeed())
		token := string(secret.Data[v1.AccessTokenSecretKey])
		Expect(secret.Annotations).To(HaveKeyWithValue(v1.AccessTokenRotationAnnotation, "0"))

		before := t.DeepCopy()
		t.Status.AccessTokenHash = ""
		Expect(k8s.Status().Patch(ctx, t, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.AccessTokenHash).To(Equal(keys.Hash(token)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		Expect(string(secret.Data[v1.AccessTokenSecretKey])).To(Equal(token))
	})

	It("refuses a second Tenant in the same namespace", func() {
		ns := newTenantNamespace()
		first := readyTenantIn(ns)
		second := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "zz-second", Namespace: ns}}
		Expect(k8s.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			c := meta.FindStatusCondition(second.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1.ReasonDuplicateTenant))
			g.Expect(c.Message).To(ContainSubstring(first.Name))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(second.Status.UserID).To(BeZero())
		registered := meta.FindStatusCondition(second.Status.Conditions, v1.ConditionRegistered)
		Expect(registered).NotTo(BeNil())
		Expect(registered.Status).To(Equal(metav1.ConditionFalse))
		Expect(registered.Reason).To(Equal(v1.ReasonBlocked))
		Expect(registered.Message).To(ContainSubstring("already has Tenant"))
	})

	It("reports a grant it cannot apply on GrantsApplied, and stays registered and Ready", func() {
		ns := newTenantNamespace()
		t := readyTenantIn(ns, v1.Grant{ID: "welcome", Quota: ptr.To[int64](1000)})
		update(t, func(t *v1.Tenant) {
			t.Spec.Grants = append(t.Spec.Grants, v1.Grant{ID: "crumb", Credits: credits("0.0001")})
		})
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			grants := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionGrantsApplied)
			g.Expect(grants).NotTo(BeNil())
			g.Expect(grants.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(grants.Reason).To(Equal(v1.ReasonInvalidSpec))
			g.Expect(grants.Message).To(ContainSubstring(`grant "crumb": 0.0001 credits round to no quota`))
			g.Expect(grants.ObservedGeneration).To(Equal(t.Generation))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionRegistered)).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionAccessTokenReady)).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue(), "its keys go on working")
		Expect(t.Status.AppliedGrants).To(ConsistOf("welcome"))

		By("fixing the grant, which applies it")
		update(t, func(t *v1.Tenant) { t.Spec.Grants[1].Credits = credits("1") })
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionGrantsApplied)).To(BeTrue())
			g.Expect(t.Status.AppliedGrants).To(ConsistOf("welcome", "crumb"))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})
})
