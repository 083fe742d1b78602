package generationtask_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/tasktest"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
)

var _ = Describe("GenerationTask reconciler", func() {
	BeforeEach(setUp)

	It("adds the ledger finalizer to a task created without it, and acts only in the next reconcile", func() {
		t := submit("bare lamps", 1, "sim")
		controllerutil.RemoveFinalizer(t, v1.LedgerFinalizer)
		Expect(c.Update(ctx, t)).To(Succeed()) // as if applied by hand
		step(t)
		Expect(t.Finalizers).To(ContainElement(v1.LedgerFinalizer))
		Expect(t.Status.Phase).To(BeEmpty(), "no work in the reconcile that added the finalizer")
		step(t)
		Expect(t.Status.Phase).NotTo(BeEmpty())
	})

	It("refunds a task deleted before it ends and archives it as failed (deleted); usage rows are untouched", func() {
		before := balance()
		t := submit("deleted lamps", 2, "sim")
		step(t)
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(t.Finalizers).To(ContainElement(v1.LedgerFinalizer))
		Expect(balance().Remain).To(BeNumerically("<", before.Remain), "reserved while running")

		Expect(c.Delete(ctx, t)).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed(), "held by the finalizer")
		_, err := tasktest.Step(ctx, r, c, t)
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(t), &v1.GenerationTask{}))).To(BeTrue(), "gone once settled")

		Expect(balance().Balance).To(Equal(before.Balance), "the reservation came back in full")
		rec, err := ledger.TaskByID(ctx, userID, t.Spec.TaskID)
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Status).To(Equal("failed"))
		Expect(rec.BillingStatus).To(Equal(string(v1.BillingRefunded)))
		Expect(rec.CompletedAt).NotTo(BeZero())
		Expect(string(rec.Body)).To(ContainSubstring(`"code":"deleted"`))
	})

	It("does not abandon a deleted task twice when a reconcile reads a cache that has not seen the first one", func() {
		t := submit("deleted once", 1, "sim")
		step(t)
		step(t)
		Expect(c.Delete(ctx, t)).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		stale := t.DeepCopy() // deleting, finalizer held, not final
		drainEvents()
		_, err := tasktest.Step(ctx, r, c, t)
		Expect(err).NotTo(HaveOccurred())
		Expect(drainEvents()).To(ConsistOf(ContainSubstring("was refunded")), "the deletion is handled")
		after := balance()

		// A second reconcile, woken while the first ran, reads the object as
		// the cache last saw it; the API server has deleted it.
		lagging := *r
		lagging.Client, lagging.APIReader = staleReads{Client: c, obj: stale}, c
		_, err = lagging.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
		Expect(err).NotTo(HaveOccurred())
		Expect(drainEvents()).To(BeEmpty(), "no second cancel, refund or archive")
		Expect(balance()).To(Equal(after))
	})

	It("does not submit a task twice when a reconcile reads a cache that has not seen the submission", func() {
		media := &countingMedia{}
		r.Upstreams = upstream.NewRegistry(upstream.Entry{Name: "simulated", Adapter: media})
		t := submit("submitted once", 1, "sim")
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
		stale := t.DeepCopy() // queued, not yet submitted
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(media.submits.Load()).To(Equal(int32(1)))
		accepted := t.Status

		lagging := *r
		lagging.Client, lagging.APIReader = staleReads{Client: c, obj: stale}, c
		res, err := lagging.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "it looks again once the cache has caught up")
		Expect(media.submits.Load()).To(Equal(int32(1)), "no second submission to the vendor")
		Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		Expect(t.Status).To(Equal(accepted), "the first submission's status stands")
	})

	It("advances queued → in_progress → completed with coalesced progress, settles once, archives, and deletes after retention", func() {
		t := submit("four lamps", 4, "sim")
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingPending))
		rec, err := ledger.TaskByID(ctx, userID, t.Spec.TaskID)
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Status).To(Equal("queued"))

		res := step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(t.Status.Backend).To(Equal("sim"))
		Expect(t.Status.Attempts).To(Equal(int32(1)))
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))

		By("an early wake-up (our own status write) changes nothing")
		rv := t.ResourceVersion
		res = step(t)
		Expect(t.ResourceVersion).To(Equal(rv))
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))

		By("polls thin out as the task runs, and progress is written only at polls")
		clk.Step(4 * time.Second)
		res = step(t)
		Expect(t.Status.Progress).To(Equal(int32(40)))
		Expect(res.RequeueAfter).To(Equal(2 * time.Second))
		Expect(balance().Remain).To(Equal(billing.Quota(billing.QuotaPerUSD - 80000))) // 4 × 20 000 pre-deducted

		clk.Step(6 * time.Second)
		inFlight := t.DeepCopy()
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskCompleted))
		Expect(t.Status.Progress).To(Equal(int32(100)))
		Expect(t.Status.Result.Data).To(HaveLen(4))
		Expect(t.Status.Result.Data[0].URL).To(HavePrefix(tasks.BlobScheme + "tenants/" + ns + "/tasks/"))
		Expect(t.Status.ExpiresAt.Sub(t.Status.CompletedAt.Time)).To(Equal(24 * time.Hour))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingSettled))
		Expect(string(*t.Status.Billing.Credits)).To(Equal("32"))
		Expect(string(*t.Status.Billing.CostUSD)).To(Equal("0.16"))
		Expect(balance().Used).To(Equal(billing.Quota(80000)))

		By("a restart that lost the final status write settles again without a second charge")
		t.Status = inFlight.Status
		Expect(c.Status().Update(ctx, t)).To(Succeed())
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskCompleted))
		Expect(balance().Used).To(Equal(billing.Quota(80000)))
		Expect(balance().Remain).To(Equal(billing.Quota(billing.QuotaPerUSD - 80000)))

		step(t)
		Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		rec, err = ledger.TaskByID(ctx, userID, t.Spec.TaskID)
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Status).To(Equal("completed"))
		Expect(rec.BillingStatus).To(Equal("settled"))
		Expect(rec.Quota).To(Equal(int64(80000)))
		back, err := tasks.FromRecord(rec)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Status.Result.Data).To(Equal(t.Status.Result.Data))

		res = step(t)
		Expect(res.RequeueAfter).To(Equal(retention))
		clk.Step(retention)
		step(t)
		Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(t), &v1.GenerationTask{}))).To(BeTrue())
	})

	It("fails and refunds on the failure directive, restoring the balance exactly", func() {
		before := balance()
		t := submit("[sim:fail] broken", 2, "sim")
		step(t)
		step(t)
		clk.Step(delay)
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Code).To(Equal(v1.CodeGenerationFailed))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(string(*t.Status.Billing.Credits)).To(Equal("0"))
		Expect(recorded.Events).To(Receive(HavePrefix("Warning " + v1.EventTaskFailed + " task " + t.Spec.TaskID + " failed and was refunded")))
		Expect(t.Status.Result).To(BeNil())
		Expect(balance().Remain).To(Equal(before.Remain))
		Expect(balance().Used).To(Equal(before.Used))
	})

	It("fails a task whose backend has no asynchronous adapter, before anything is charged", func() {
		before := balance()
		t := submit("x", 1, "real")
		step(t)
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Message).To(ContainSubstring(`provider "anthropic" has no asynchronous media adapter`))
		Expect(balance().Remain).To(Equal(before.Remain))
	})
})
