package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("ModelRoute controller", func() {
	It("publishes per-backend readiness and follows the credential Secret", func() {
		ns := newTenantNamespace()
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns},
			Spec: v1.ModelRouteSpec{Model: "chat-model", Backends: []v1.Backend{
				{Name: "sim", Provider: "simulated"},
				{Name: "remote", Provider: "openai", BaseURL: "https://upstream.example/v1",
					CredentialSecretRef: &v1.SecretKeyRef{Name: "upstream", Key: "apiKey"}},
				{Name: "off", Provider: "simulated", Disabled: true},
				{Name: "mystery", Provider: "no-such-provider", BaseURL: "https://x.example"},
			}},
		}
		Expect(k8s.Create(ctx, route)).To(Succeed())

		byName := func(g Gomega) map[string]v1.BackendStatus {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
			out := map[string]v1.BackendStatus{}
			for _, b := range route.Status.Backends {
				out[b.Name] = b
			}
			return out
		}
		Eventually(func(g Gomega) {
			st := byName(g)
			g.Expect(st).To(HaveLen(4))
			g.Expect(st["sim"].Ready).To(BeTrue())
			g.Expect(st["remote"].Reason).To(Equal(v1.ReasonCredentialMissing))
			g.Expect(st["off"].Reason).To(Equal(v1.ReasonBackendDisabled))
			g.Expect(st["mystery"].Reason).To(Equal(v1.ReasonUnknownProvider))
			g.Expect(route.Status.ReadyBackends).To(Equal(int32(1)))
			g.Expect(meta.IsStatusConditionTrue(route.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		all := meta.FindStatusCondition(route.Status.Conditions, v1.ConditionBackendsReady)
		Expect(all).NotTo(BeNil())
		Expect(all.Status).To(Equal(metav1.ConditionFalse))
		Expect(all.Reason).To(Equal(v1.ReasonSomeBackendsFailed))
		Expect(all.Message).To(ContainSubstring(`remote: CredentialMissing (Secret upstream has no key "apiKey")`))
		Expect(all.Message).To(ContainSubstring("mystery: UnknownProvider"))

		By("creating the credential, which readies the remote backend")
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: ns},
			StringData: map[string]string{"apiKey": "upstream-secret"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(byName(g)["remote"].Ready).To(BeTrue())
			g.Expect(route.Status.ReadyBackends).To(Equal(int32(2)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		raw, _ := k8sJSON(route.Status)
		Expect(raw).NotTo(ContainSubstring("upstream-secret"))
	})

	It("refuses a backend whose assetLibrary names no library, or one that cannot review it", func() {
		ns := newTenantNamespace()
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "reviewed", Namespace: ns},
			Spec: v1.ModelRouteSpec{Model: "reviewed-model", Backends: []v1.Backend{
				{Name: "own", Provider: "simulated", Options: map[string]string{"assetLibrary": "simulated"}},
				{Name: "off", Provider: "simulated", Options: map[string]string{"assetLibrary": "none"}},
				{Name: "typo", Provider: "simulated", Options: map[string]string{"assetLibrary": "simulatd"}},
				{Name: "foreign", Provider: "simulated", Options: map[string]string{"assetLibrary": "ark", "assetGroupId": "group-1"}},
			}},
		}
		Expect(k8s.Create(ctx, route)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
			got := map[string]v1.BackendStatus{}
			for _, b := range route.Status.Backends {
				got[b.Name] = b
			}
			g.Expect(got).To(HaveLen(4))
			g.Expect(got["own"].Ready).To(BeTrue())
			g.Expect(got["off"].Ready).To(BeTrue())
			g.Expect(got["typo"].Ready).To(BeFalse())
			g.Expect(got["typo"].Reason).To(Equal(v1.ReasonInvalidAssetLibrary))
			g.Expect(got["typo"].Message).To(And(ContainSubstring(`"simulatd" names no asset library`), ContainSubstring("ark, simulated")))
			g.Expect(got["foreign"].Ready).To(BeFalse())
			g.Expect(got["foreign"].Reason).To(Equal(v1.ReasonInvalidAssetLibrary))
			g.Expect(got["foreign"].Message).To(ContainSubstring(`asset library "ark" cannot review this backend`))
			g.Expect(route.Status.ReadyBackends).To(Equal(int32(2)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("is not ready without a ready backend", func() {
		ns := newTenantNamespace()
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "dead", Namespace: ns},
			Spec:       v1.ModelRouteSpec{Model: "dead", Backends: []v1.Backend{{Name: "a", Provider: "simulated", Disabled: true}}},
		}
		Expect(k8s.Create(ctx, route)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
			c := meta.FindStatusCondition(route.Status.Conditions, v1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1.ReasonNoReadyBackend))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("names one default route per type and namespace, and hands the role on when it goes", func() {
		ns := newTenantNamespace()
		image := func(name string, def bool) *v1.ModelRoute {
			return &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1.ModelRouteSpec{Model: v1.ModelID(name), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileSingleImage,
					DefaultModel: def, Backends: []v1.Backend{{Name: "sim", Provider: "simulated"}}}}
		}
		defaultOf := func(g Gomega, rt *v1.ModelRoute) *metav1.Condition {
			cur := &v1.ModelRoute{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rt), cur)).To(Succeed())
			return meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionDefault)
		}
		first, plain := image("img-first", true), image("img-plain", false)
		Expect(k8s.Create(ctx, first)).To(Succeed())
		Expect(k8s.Create(ctx, plain)).To(Succeed())
		time.Sleep(1100 * time.Millisecond) // creation timestamps have whole seconds: the second default is younger
		second := image("img-second", true)
		Expect(k8s.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			c := defaultOf(g, first)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			c = defaultOf(g, second)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1.ReasonDefaultTaken))
			g.Expect(c.Message).To(ContainSubstring("img-first"))
			g.Expect(defaultOf(g, plain)).To(BeNil())
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("deleting the default, which makes the other one the default")
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			c := defaultOf(g, second)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("refusing a default text route: text requests always name their model")
		text := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: "txt", Namespace: ns},
			Spec: v1.ModelRouteSpec{Model: "txt", DefaultModel: true, Backends: []v1.Backend{{Name: "sim", Provider: "simulated"}}}}
		err := k8s.Create(ctx, text)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("defaultModel applies to image and video routes"))
	})
})
