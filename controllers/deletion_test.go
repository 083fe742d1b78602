package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

// Deletion settles money: a deleted key or tenant reserves nothing more and
// the quota its leases held comes back; usage rows stay.
var _ = Describe("Deletion", func() {
	gone := func(obj client.Object) {
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		}, framework.Timeout, framework.Interval).Should(BeTrue(), "the finalizer is removed once the ledger is settled")
	}
	// leased takes a lease on the token, as a gateway replica serving it would.
	leased := func(tokenID, userID int64) {
		l := ledger.NewLeaser(store.LeaseConfig{ReplicaID: "gw-test", Chunk: 50_000, TTL: time.Hour})
		h, err := l.Reserve(ctx, "", tokenID, userID, 100)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Release(ctx, h)).To(Succeed())
		held, err := ledger.TokenLeased(ctx, tokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeNumerically(">", 0))
	}

	It("disables a deleted ApiToken in the ledger and returns its leases; its rows stay", func() {
		ns := newTenantNamespace()
		tenant := readyTenantIn(ns, v1.Grant{ID: "g", Credits: credits("100")})
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "doomed", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "doomed", Quota: ptr.To[int64](250_000)}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		readyToken(tok)
		Expect(tok.Finalizers).To(ContainElement(v1.LedgerFinalizer))
		id, userID := tok.Status.TokenID, tenant.Status.UserID
		leased(id, userID)
		_, err := ledger.InsertUsage(ctx, []store.UsageRow{{RequestID: "row-of-" + ns, UserID: userID, TokenID: id, Quota: 10,
			CreatedAt: time.Now().Unix()}})
		Expect(err).NotTo(HaveOccurred())

		Expect(k8s.Delete(ctx, tok)).To(Succeed())
		gone(tok)
		disabled, err := ledger.TokenDisabled(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(disabled).To(BeTrue())
		held, err := ledger.TokenLeased(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeZero())
		b, err := ledger.TokenUsage(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Remain+b.Used).To(Equal(billing.Quota(250_000)), "nothing stranded")
		Expect(ledger.Reserve(ctx, "after-"+ns, id, userID, 1)).To(MatchError(store.ErrTokenDisabled))
	})

	It("disables every key of a deleted Tenant and returns their leases", func() {
		ns := newTenantNamespace()
		tenant := readyTenantIn(ns, v1.Grant{ID: "g", Credits: credits("100")})
		tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: ns},
			Spec: v1.ApiTokenSpec{DisplayName: "k", Quota: ptr.To[int64](100_000)}}
		Expect(k8s.Create(ctx, tok)).To(Succeed())
		readyToken(tok)
		Expect(tenant.Finalizers).To(ContainElement(v1.LedgerFinalizer))
		leased(tok.Status.TokenID, tenant.Status.UserID)

		Expect(k8s.Delete(ctx, tenant)).To(Succeed())
		gone(tenant)
		disabled, err := ledger.TokenDisabled(ctx, tok.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(disabled).To(BeTrue())
		held, err := ledger.TenantLeased(ctx, tenant.Status.UserID)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeZero())
		bal, err := ledger.TenantBalance(ctx, tenant.Status.UserID)
		Expect(err).NotTo(HaveOccurred())
		Expect(bal.Remain).To(Equal(billing.Quota(250_000)), "the tenant's balance is whole (100 credits)")
	})
})
