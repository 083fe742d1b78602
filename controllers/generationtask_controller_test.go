package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/controllers/internal/tasktest"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

// These specs drive the GenerationTask reconciler step by step with a fake
// clock, on a fake API client (so the suite's manager does not race them)
// and the suite's real ledger.
var _ = Describe("GenerationTask reconciler", func() {
	const (
		ns        = "tenant-tasks"
		delay     = 10 * time.Second
		retention = time.Hour
		price     = "0.04" // USD per image
	)
	var (
		clk      *clocktesting.FakeClock
		c        client.Client
		r        *controllers.GenerationTaskReconciler
		recorded *events.FakeRecorder
		copies   *fakeCopier
		userID   int64
		tokenID  int64
		seq      int
	)

	BeforeEach(func() {
		seq++
		var err error
		userID, err = ledger.EnsureTenant(ctx, fmt.Sprintf("gt-tenant-%d-%d", GinkgoRandomSeed(), seq), ns, "acct")
		Expect(err).NotTo(HaveOccurred())
		tokenID, err = ledger.EnsureToken(ctx, store.TokenSpec{UID: fmt.Sprintf("gt-token-%d-%d", GinkgoRandomSeed(), seq),
			UserID: userID, Name: "key", RemainQuota: billing.QuotaPerUSD})
		Expect(err).NotTo(HaveOccurred())
		_, err = ledger.ApplyGrant(ctx, userID, "g", billing.QuotaPerUSD)
		Expect(err).NotTo(HaveOccurred())

		clk = clocktesting.NewFakeClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "modelgate-system"},
			Spec: v1.ModelRouteSpec{Model: "img", Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileMultiImage,
				Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Options: map[string]string{"delay": delay.String()}},
					{Name: "real", Provider: "anthropic"}}},
		}
		scheme := runtime.NewScheme()
		Expect(v1.AddToScheme(scheme)).To(Succeed())
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		c = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.GenerationTask{}).WithObjects(route).Build()
		blobs, err := blob.OpenLocal(blob.Config{Dir: GinkgoT().TempDir(), SigningKey: []byte("0123456789abcdef0123"),
			BaseURL: func() string { return "http://files.test" }})
		Expect(err).NotTo(HaveOccurred())
		recorded = events.NewFakeRecorder(100)
		copies = &fakeCopier{}
		r = &controllers.GenerationTaskReconciler{Client: c, Ledger: ledger, Upstreams: builtin.Registry(), Blobs: blobs, Clock: clk,
			Retention: retention, Events: recorded, Copier: copies}
	})

	// submit does what the gateway does: reserve, then create the task.
	submit := func(prompt string, n int64, backends ...string) *v1.GenerationTask {
		t, err := tasktest.Submit(ctx, c, ledger, tasktest.Task{Namespace: ns, RouteNamespace: "modelgate-system",
			Request: fmt.Sprintf(`{"prompt":%q,"n":%d,"size":"1:1"}`, prompt, n), N: n, UnitPrice: price,
			Backends: backends, TokenID: tokenID, UserID: userID, Accepted: clk.Now()})
		Expect(err).NotTo(HaveOccurred())
		return t
	}

	step := func(t *v1.GenerationTask) ctrl.Result {
		res, err := tasktest.Step(ctx, r, c, t)
		Expect(err).NotTo(HaveOccurred())
		return res
	}

	balance := func() store.TokenBalance {
		b, err := ledger.TokenUsage(ctx, tokenID)
		Expect(err).NotTo(HaveOccurred())
		return b
	}

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
		Expect(t.Status.Error.Code).To(Equal(controllers.CodeGenerationFailed))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(string(*t.Status.Billing.Credits)).To(Equal("0"))
		Expect(recorded.Events).To(Receive(HavePrefix("Warning " + v1.EventTaskFailed + " task " + t.Spec.TaskID + " failed and was refunded")))
		Expect(t.Status.Result).To(BeNil())
		Expect(balance().Remain).To(Equal(before.Remain))
		Expect(balance().Used).To(Equal(before.Used))
	})

	Describe("private asset review", func() {
		// submitReview turns a fresh task into one asking for review of urls.
		submitReview := func(urls ...string) *v1.GenerationTask {
			t := submit("review me", 1, "sim")
			sub, err := tasks.SubmissionOf(t)
			Expect(err).NotTo(HaveOccurred())
			for _, u := range urls {
				sub.ReviewAssets = append(sub.ReviewAssets, tasks.ReviewAsset{Type: "image", URL: u, Role: "reference_image"})
			}
			// sub is t's spec.submission: the fake client does not enforce immutability.
			t.Spec.PrivateAssetReview = true
			Expect(c.Update(ctx, t)).To(Succeed())
			step(t) // queued
			step(t) // round 1 opens
			return t
		}
		// pending asserts that t waits in its first review round.
		pending := func(t *v1.GenerationTask) {
			GinkgoHelper()
			Expect(t.Status.ReviewRounds).To(HaveLen(1))
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("pending"))
			Expect(t.Status.ReviewRounds[0].Deadline.Time).To(BeTemporally("~", clk.Now().Add(controllers.DefaultReviewDeadline), time.Second))
		}

		It("starts generation once every asset passed", func() {
			t := submitReview("https://cdn.example/a.png", "https://cdn.example/b.png")
			pending(t)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued)) // the review takes its time
			clk.Step(simulated.DefaultReviewTime)
			step(t)
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(t.Status.ReviewRounds[0].Assets[1].State).To(Equal("passed"))
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		})

		It("fails without a generation fee when an asset is rejected", func() {
			before := balance()
			t := submitReview("https://cdn.example/ok.png", "https://cdn.example/reject-me.png")
			pending(t)
			clk.Step(simulated.DefaultReviewTime)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("rejected"))
			Expect(t.Status.Error.Message).To(ContainSubstring("reject-me.png"))
			Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("fails without a generation fee when an asset cannot be copied, before the review service sees it", func() {
			before := balance()
			t := submitReview("https://cdn.example/ok.png", "https://cdn.example/unusable.png")
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("rejected"))
			Expect(t.Status.Error.Message).To(Equal("private asset review could not use the image asset https://cdn.example/unusable.png: " +
				"the image asset is empty; no video generation fee is charged"))
			Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("fails without a generation fee when the round runs past its deadline", func() {
			before := balance()
			t := submitReview("https://cdn.example/slow.png")
			pending(t)
			clk.Step(time.Minute)
			res := step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
			Expect(res.RequeueAfter).To(BeNumerically(">", 0))
			clk.Step(controllers.DefaultReviewDeadline)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("expired"))
			Expect(t.Status.Error.Message).To(ContainSubstring("deadline"))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("shares one preparation between concurrent tasks and reuses a passed asset later", func() {
			first := submitReview("https://cdn.example/shared.png")
			pending(first)
			clk.Step(simulated.DefaultReviewTime / 2)
			second := submitReview("https://cdn.example/shared.png", "https://cdn.example/own.png")
			pending(second)

			By("the shared asset is decided once, on the first task's schedule")
			clk.Step(simulated.DefaultReviewTime / 2)
			step(first)
			step(second)
			Expect(first.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(first.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(second.Status.ReviewRounds[0].Assets[0].State).To(Equal("passed"), "decided with the first task's preparation")
			Expect(second.Status.ReviewRounds[0].Assets[1].State).To(Equal("pending"), "its own asset is still under review")
			clk.Step(simulated.DefaultReviewTime / 2)
			step(second)
			Expect(second.Status.Phase).To(Equal(v1.TaskInProgress))

			By("a later task with the same asset on the same channel passes at once")
			clk.Step(time.Hour)
			third := submitReview("https://cdn.example/shared.png")
			Expect(third.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(third.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(copies.urls()).To(Equal([]string{"https://cdn.example/shared.png", "https://cdn.example/own.png"}),
				"each asset is copied once, by the preparation that started it")
		})

		It("skips review on a channel without a private asset library", func() {
			route := &v1.ModelRoute{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: "modelgate-system", Name: "img"}, route)).To(Succeed())
			route.Spec.Backends[0].Options["assetLibrary"] = "none"
			Expect(c.Update(ctx, route)).To(Succeed())
			t := submitReview("https://cdn.example/reject-me.png")
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(t.Status.ReviewRounds).To(BeEmpty())
		})
	})

	Describe("webhooks", func() {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		type delivery struct {
			header http.Header
			body   []byte
		}
		var (
			mu         sync.Mutex
			deliveries []delivery
			failFirst  int
			srv        *httptest.Server
		)
		received := func() []delivery {
			mu.Lock()
			defer mu.Unlock()
			return append([]delivery(nil), deliveries...)
		}

		BeforeEach(func() {
			mu.Lock()
			deliveries, failFirst = nil, 0
			mu.Unlock()
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				body, _ := io.ReadAll(req.Body)
				mu.Lock()
				deliveries = append(deliveries, delivery{header: req.Header.Clone(), body: body})
				fail := len(deliveries) <= failFirst
				mu.Unlock()
				if fail {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			DeferCleanup(srv.Close)
			Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
				Data: map[string][]byte{"secret": []byte(secret)}})).To(Succeed())
			tenant := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns},
				Spec: v1.TenantSpec{Webhook: &v1.WebhookSpec{URL: srv.URL + "/hooks/tasks", MaxAttempts: 3,
					SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}},
				Status: v1.TenantStatus{UserID: userID}}
			Expect(c.Create(ctx, tenant)).To(Succeed())
		})

		// finishTask runs a task to its final state.
		finishTask := func(prompt string) *v1.GenerationTask {
			t := submit(prompt, 2, "sim")
			step(t)
			step(t)
			clk.Step(delay)
			step(t)
			Expect(tasks.Final(t.Status.Phase)).To(BeTrue())
			return t
		}

		It("signs the final state with data.billing; a receiver that fails twice gets the third delivery", func() {
			failFirst = 2
			t := finishTask("hooked")
			Expect(t.Status.Phase).To(Equal(v1.TaskCompleted))

			res := step(t) // archived; attempt 1
			Expect(received()).To(HaveLen(1))
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookPending))
			Expect(t.Status.Webhook.LastStatusCode).To(Equal(int32(500)))
			Expect(res.RequeueAfter).To(BeNumerically("~", 5*time.Second, 2*time.Second))
			Expect(step(t).RequeueAfter).To(BeNumerically(">", 0), "not due yet: no attempt")
			Expect(received()).To(HaveLen(1))

			clk.Step(res.RequeueAfter)
			res = step(t) // attempt 2
			Expect(received()).To(HaveLen(2))
			Expect(res.RequeueAfter).To(BeNumerically("~", 30*time.Second, 7*time.Second))
			clk.Step(res.RequeueAfter)
			res = step(t) // attempt 3
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookDelivered))
			Expect(t.Status.Webhook.Attempts).To(Equal(int32(3)))
			Expect(t.Status.Webhook.DeliveredAt).NotTo(BeNil())
			Expect(t.Status.Webhook.LastError).To(BeEmpty())

			got := received()
			Expect(got).To(HaveLen(3))
			// A receiver built on the Standard Webhooks reference library
			// verifies it (the timestamp is the test's fake clock).
			receiver, err := standardwebhooks.NewWebhook(secret)
			Expect(err).NotTo(HaveOccurred())
			last := got[2]
			Expect(receiver.VerifyIgnoringTimestamp(last.body, last.header)).To(Succeed())
			Expect(last.header.Get("webhook-timestamp")).To(Equal(fmt.Sprint(clk.Now().Unix())))
			Expect(last.header.Get("webhook-id")).To(Equal(got[0].header.Get("webhook-id")), "one event ID across retries")

			var ev struct {
				Object, ID, Type string
				Data             struct {
					ID, Status string
					Result     struct{ Data []struct{ URL string } }
					Billing    map[string]string
				}
			}
			Expect(json.Unmarshal(last.body, &ev)).To(Succeed())
			Expect(ev.Object).To(Equal("event"))
			Expect(ev.Type).To(Equal(v1.WebhookEventTaskCompleted))
			Expect(ev.ID).To(Equal(last.header.Get("webhook-id")))
			Expect(ev.Data.ID).To(Equal(t.Spec.TaskID))
			Expect(ev.Data.Status).To(Equal("completed"))
			Expect(ev.Data.Billing).To(Equal(map[string]string{"status": "settled", "credits": "16", "cost_usd": "0.08"}))
			Expect(ev.Data.Result.Data).To(HaveLen(2))
			Expect(ev.Data.Result.Data[0].URL).To(HavePrefix("http://files.test/"), "result URLs are signed, not blob keys")

			By("the object is deleted after its retention once the event is delivered")
			Expect(res.RequeueAfter).To(BeNumerically(">", 0))
			clk.Step(retention)
			step(t)
			Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(t), &v1.GenerationTask{}))).To(BeTrue())
			Expect(received()).To(HaveLen(3))
		})

		It("sends nothing to an internal address: the delivery gives up at once", func() {
			// A receiver on 127.0.0.2: loopback, and not on the tests' allow-list (127.0.0.1 only).
			ln, err := net.Listen("tcp", "127.0.0.2:0")
			if err != nil {
				Skip("127.0.0.2 is not usable here: " + err.Error())
			}
			var hits atomic.Int32
			internal := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) })}
			go func() { _ = internal.Serve(ln) }()
			DeferCleanup(internal.Close)
			tenant := &v1.Tenant{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acct"}, tenant)).To(Succeed())
			tenant.Spec.Webhook.URL = "http://" + ln.Addr().String() + "/hooks/tasks"
			Expect(c.Update(ctx, tenant)).To(Succeed())

			By("the task's event is given up after one refused attempt; nothing reached the receiver")
			t := finishTask("hooked inside")
			step(t)
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookFailed))
			Expect(t.Status.Webhook.Attempts).To(Equal(int32(1)))
			Expect(t.Status.Webhook.LastError).To(ContainSubstring("not allowed"))
			Expect(t.Status.Webhook.LastError).NotTo(ContainSubstring("127.0.0.2"))
			Expect(hits.Load()).To(BeZero())
			Expect(received()).To(BeEmpty())
		})

		It("sends task.failed with refunded billing and gives up after maxAttempts", func() {
			failFirst = 100
			t := finishTask("[sim:fail] hooked")
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			for range 3 {
				res := step(t)
				clk.Step(res.RequeueAfter)
			}
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookFailed))
			Expect(t.Status.Webhook.Attempts).To(Equal(int32(3)))
			Expect(t.Status.Webhook.NextAttemptAt).To(BeNil())
			Expect(t.Status.Webhook.LastError).To(ContainSubstring("HTTP 500"))
			got := received()
			Expect(got).To(HaveLen(3))
			var ev struct {
				Type string
				Data struct {
					Error   map[string]string
					Billing map[string]string
				}
			}
			Expect(json.Unmarshal(got[0].body, &ev)).To(Succeed())
			Expect(ev.Type).To(Equal(v1.WebhookEventTaskFailed))
			Expect(ev.Data.Error["code"]).To(Equal(controllers.CodeGenerationFailed))
			Expect(ev.Data.Billing).To(Equal(map[string]string{"status": "refunded", "credits": "0", "cost_usd": "0"}))

			clk.Step(retention)
			step(t)
			Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(t), &v1.GenerationTask{}))).To(BeTrue())
		})

		It("records a missing signing secret as the delivery error without sending", func() {
			Expect(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}})).To(Succeed())
			t := finishTask("no secret")
			step(t)
			Expect(received()).To(BeEmpty())
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookPending))
			Expect(t.Status.Webhook.LastError).To(ContainSubstring("does not exist"))
		})
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

// fakeCopier "copies" every URL except one containing "unusable", which it
// refuses as an empty file, and records what it copied.
type fakeCopier struct {
	mu     sync.Mutex
	copied []string
}

func (f *fakeCopier) Copy(_ context.Context, _, rawURL, keyBase string) (uploads.Object, error) {
	if strings.Contains(rawURL, "unusable") {
		return uploads.Object{}, &assetcopy.Refusal{Message: "the image asset is empty"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copied = append(f.copied, rawURL)
	return uploads.Object{Key: keyBase + ".png", MimeType: "image/png", Size: 1}, nil
}

func (f *fakeCopier) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.copied...)
}
