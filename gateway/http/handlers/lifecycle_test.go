package handlers_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("key lifecycle at the gateway", func() {
	balanceCode := func(key string) func() int {
		return func() int {
			code, _, _ := call("GET", "/v1/user/balance", bearer(key), nil)
			return code
		}
	}

	It("rejects a key whose expiry passes, at the second", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		// A merge patch, not an update: the token controller may have written
		// the object since NewAccount read it, and an update would then fail
		// on its stale resourceVersion.
		before := acct.Token.DeepCopy()
		soon := metav1.NewTime(time.Now().Add(4 * time.Second).Truncate(time.Second))
		acct.Token.Spec.ExpiresAt = &soon
		Expect(stack.Client.Patch(ctx, acct.Token, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(acct.Token), acct.Token)).To(Succeed())
			g.Expect(acct.Token.Status.ObservedGeneration).To(Equal(acct.Token.Generation))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		if time.Until(soon.Time) > 500*time.Millisecond {
			// A loaded machine may reconcile slower than the expiry comes;
			// then only the rejection below is left to check.
			Expect(balanceCode(acct.Key)()).To(Equal(200))
		}
		Eventually(balanceCode(acct.Key), 10*time.Second, 50*time.Millisecond).Should(Equal(401))
		Expect(time.Now()).To(BeTemporally(">=", soon.Time), "a key is good until its expiry")
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(acct.Token), acct.Token)).To(Succeed())
			g.Expect(acct.Token.Status.State).To(Equal(v1.TokenExpired))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("disables every key of a deleted tenant and keeps its ledger history", func() {
		acct, err := stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Quota: ptr.To[int64](1000)}}}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		Expect(balanceCode(acct.Key)()).To(Equal(200))
		Expect(stack.Client.Delete(ctx, acct.Tenant)).To(Succeed())
		Eventually(balanceCode(acct.Key)).Should(Equal(401))
		Eventually(func(g Gomega) {
			g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(acct.Token), acct.Token)).To(Succeed())
			g.Expect(acct.Token.Status.State).To(Equal(v1.TokenDisabled))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		b, err := stack.Ledger.TenantBalance(ctx, acct.Tenant.Status.UserID)
		Expect(err).NotTo(HaveOccurred())
		Expect(int64(b.Remain)).To(Equal(int64(1000)), "the ledger keeps the account")
	})

	It("never lets tenant A's credentials reach tenant B", func() {
		a, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		b, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		s := &corev1.Secret{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Tenant.Status.AccessTokenSecretName}, s)).To(Succeed())
		aAccess := string(s.Data[v1.AccessTokenSecretKey])

		// A's access token with B's user ID.
		code, body, _ := call("GET", "/api/usage/tokens/summary?start_timestamp=1&end_timestamp=1000", map[string]string{
			"Authorization": "Bearer " + aAccess, "X-User-Id": strconv.FormatInt(b.Tenant.Status.UserID, 10)}, nil)
		Expect(code).To(Equal(401))
		Expect(body["error"]).To(HaveKeyWithValue("code", "unauthorized"))

		// A's key creates a token: it lands in A's namespace only.
		code, body, _ = call("POST", "/v1/tokens", bearer(a.Key), map[string]any{"name": "made by a"})
		Expect(code).To(Equal(200))
		Expect(body["success"]).To(BeTrue())
		list := &v1.ApiTokenList{}
		Expect(stack.Client.List(ctx, list, client.InNamespace(b.Namespace))).To(Succeed())
		for _, t := range list.Items {
			Expect(t.Spec.DisplayName).NotTo(Equal("made by a"))
		}

		// A's key reports A's balance, not B's.
		_, ab, _ := call("GET", "/v1/balance", bearer(a.Key), nil)
		Expect(num(ab["token_id"])).To(Equal(jsonInt(a.Token.Status.TokenID)))
	})
})
