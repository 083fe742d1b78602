package upstreamenv_test

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("GenerationTask on asynchronous upstreams", Ordered, func() {
	const (
		credSecret = "upstream-keys"
		perSecond  = "0.05" // USD per output second: 25 000 quota
	)
	var (
		userID, tokenID int64
		seq             int
	)

	BeforeAll(func() {
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credSecret, Namespace: systemNS},
			StringData: map[string]string{"apiKey": fakeupstream.DefaultKey}})).To(Succeed())
		var err error
		userID, err = ledger.EnsureTenant(ctx, "upstream-tenant", tenantNS, "acct")
		Expect(err).NotTo(HaveOccurred())
		tokenID, err = ledger.EnsureToken(ctx, store.TokenSpec{UID: "upstream-token", UserID: userID, Name: "key",
			RemainQuota: 10 * billing.QuotaPerUSD})
		Expect(err).NotTo(HaveOccurred())
		_, err = ledger.ApplyGrant(ctx, userID, "g", 10*billing.QuotaPerUSD)
		Expect(err).NotTo(HaveOccurred())
	})

	backend := func(name, baseURL string) v1.Backend {
		return v1.Backend{Name: name, Provider: "taskapi", BaseURL: baseURL, UpstreamModel: "vendor-video-3",
			CredentialSecretRef: &v1.SecretKeyRef{Name: credSecret, Key: "apiKey"}}
	}
	newRoute := func(backends ...v1.Backend) string {
		seq++
		name := fmt.Sprintf("video-%d", seq)
		Expect(k8s.Create(ctx, &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNS},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(name), Type: v1.ModelTypeVideo, ValidationProfile: v1.ProfileAllInOneVideo,
				Backends: backends}})).To(Succeed())
		return name
	}

	// submit does what the gateway does: reserve the estimate, then create
	// the task with its submission record.
	submit := func(route string, duration int64, backends ...string) *v1.GenerationTask {
		taskID := tasks.NewTaskID()
		requestID := "req-" + taskID
		estimate := billing.Quota(duration * 25000)
		Expect(ledger.Reserve(ctx, requestID, tokenID, userID, estimate)).To(Succeed())
		sub := &tasks.Submission{AcceptedAt: time.Now().UnixMilli(), RouteNamespace: systemNS, RouteName: route,
			Backends: backends, PriceNamespace: systemNS, PriceName: route + "-price", TokenDisplay: "key",
			Outputs: 1, DurationSeconds: duration,
			Price: v1.PriceRuleSpec{Model: v1.ModelID(route), ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds,
				Unit: v1.UnitSecond, UnitPrice: perSecond}}
		t := &v1.GenerationTask{
			ObjectMeta: metav1.ObjectMeta{Name: tasks.ObjectName(taskID), Namespace: tenantNS, Finalizers: []string{v1.LedgerFinalizer}},
			Spec: v1.GenerationTaskSpec{TaskID: taskID, Model: v1.ModelID(route), Type: v1.ModelTypeVideo,
				Profile: v1.ProfileAllInOneVideo,
				Request: runtime.RawExtension{Raw: []byte(fmt.Sprintf(
					`{"model":%q,"prompt":"a lighthouse at dusk","duration":%d,"ratio":"16:9","resolution":"720p"}`, route, duration))},
				TokenName: "key", TokenID: tokenID, UserID: userID, ReservedQuota: int64(estimate), RequestID: requestID, Submission: sub},
		}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		return t
	}

	phaseOf := func(t *v1.GenerationTask) func(Gomega) v1.TaskPhase {
		return func(g Gomega) v1.TaskPhase {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			return t.Status.Phase
		}
	}

	balance := func() store.TokenBalance {
		b, err := ledger.TokenUsage(ctx, tokenID)
		Expect(err).NotTo(HaveOccurred())
		return b
	}

	usageOf := func(taskID string) []store.UsageRecord {
		now := time.Now().Unix()
		page, err := ledger.ListUsage(ctx, store.UsageQuery{UserID: userID, Start: now - 3600, End: now + 3600, PageSize: 100})
		Expect(err).NotTo(HaveOccurred())
		var out []store.UsageRecord
		for _, r := range page.Rows {
			if r.TaskID == taskID {
				out = append(out, r)
			}
		}
		return out
	}

	posts := func(reqs []fakeupstream.Request) int {
		n := 0
		for _, r := range reqs {
			if r.Method == http.MethodPost {
				n++
			}
		}
		return n
	}

	It("moves to the next backend when the first answers 500 on submit, polls to completion, stores the bytes and bills once", func() {
		first, second := fakeupstream.NewTaskAPI(), fakeupstream.NewTaskAPI()
		defer first.Close()
		defer second.Close()
		first.FailSubmits(fakeupstream.SubmitFailure{Status: http.StatusInternalServerError, Message: "upstream overloaded"})
		video := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("frames of a lighthouse")...)
		second.SetPlan(fakeupstream.TaskPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: video, ContentType: "video/mp4"})
		route := newRoute(backend("first", first.URL), backend("second", second.URL+"/v1"))
		before := balance()

		t := submit(route, 4, "first", "second")
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskCompleted))

		Expect(posts(first.Requests())).To(Equal(1))
		Expect(first.Submissions()).To(Equal(0))
		Expect(second.Submissions()).To(Equal(1))
		Expect(second.Polls()).To(Equal(4)) // one 429, two in progress, then completed
		st := t.Status
		Expect(st.Backend).To(Equal("second"))
		Expect(st.Attempts).To(Equal(int32(2)))
		Expect(st.UpstreamTaskID).To(HavePrefix("task_up"))
		Expect(st.Progress).To(Equal(int32(100)))
		Expect(st.Result.Type).To(Equal("video"))
		Expect(st.Result.Data).To(HaveLen(1))
		Expect(st.Result.Data[0].URL).To(Equal(tasks.BlobScheme + tasks.BlobKey(tenantNS, t.Spec.TaskID, 0, "mp4")))
		Expect(blobBytes(st.Result.Data[0].URL)).To(Equal(video))

		By("billed once: 4 s at 0.05 USD, settled, one usage row with the task ID")
		Expect(st.Billing.Status).To(Equal(v1.BillingSettled))
		Expect(*st.Billing.Quota).To(Equal(int64(100000)))
		Expect(string(*st.Billing.CostUSD)).To(Equal("0.2"))
		rows := usageOf(t.Spec.TaskID)
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].BillingPhase).To(Equal(store.PhaseSettled))
		Expect(rows[0].Quota).To(Equal(billing.Quota(100000)))
		after := balance()
		Expect(after.Used - before.Used).To(Equal(billing.Quota(100000)))
		Expect(before.Remain - after.Remain).To(Equal(billing.Quota(100000)))

		By("the forwarded request carries the upstream model and our task ID as the replay key")
		var sent fakeupstream.Request
		for _, r := range second.Requests() {
			if r.Method == http.MethodPost {
				sent = r
			}
		}
		Expect(sent.Model()).To(Equal("vendor-video-3"))
		Expect(sent.JSON()).To(HaveKeyWithValue("client_business_id", t.Spec.TaskID))
		Expect(sent.JSON()).To(HaveKeyWithValue("prompt", "a lighthouse at dusk"))
	})

	It("refunds a task the upstream fails", func() {
		up := fakeupstream.NewTaskAPI()
		defer up.Close()
		up.SetPlan(fakeupstream.TaskPlan{Polls: 1, Fail: "the prompt was rejected by moderation"})
		route := newRoute(backend("only", up.URL))
		before := balance()

		t := submit(route, 6, "only")
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Code).To(Equal("generation_failed"))
		Expect(t.Status.Error.Message).To(Equal("the prompt was rejected by moderation"))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(t.Status.Result).To(BeNil())
		Expect(usageOf(t.Spec.TaskID)).To(BeEmpty())
		Expect(balance().Remain).To(Equal(before.Remain))
		Expect(balance().Used).To(Equal(before.Used))
		Expect(up.Submissions()).To(Equal(1))
	})

	It("does not submit again when the manager restarts while the task is polled", func() {
		up := fakeupstream.NewTaskAPI()
		defer up.Close()
		up.SetPlan(fakeupstream.TaskPlan{Polls: 4})
		route := newRoute(backend("only", up.URL))
		before := balance()

		t := submit(route, 5, "only")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			g.Expect(t.Status.UpstreamTaskID).NotTo(BeEmpty())
			g.Expect(up.Polls()).To(BeNumerically(">=", 1))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		stopManager()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress), "the restart must happen mid-poll")
		Expect(up.Polls()).To(BeNumerically("<=", 4))
		upstreamID := t.Status.UpstreamTaskID

		startManager()
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskCompleted))
		Expect(up.Submissions()).To(Equal(1))
		Expect(posts(up.Requests())).To(Equal(1))
		Expect(t.Status.UpstreamTaskID).To(Equal(upstreamID))
		Expect(t.Status.Attempts).To(Equal(int32(1)))
		data, ctype := fakeupstream.DefaultOutput("video", 0)
		Expect(ctype).To(Equal("video/mp4"))
		Expect(blobBytes(t.Status.Result.Data[0].URL)).To(Equal(data))
		Expect(usageOf(t.Spec.TaskID)).To(HaveLen(1))
		Expect(balance().Used - before.Used).To(Equal(billing.Quota(125000)))
	})
})
