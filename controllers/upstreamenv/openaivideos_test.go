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

// The openai provider's video family against the Videos API fake, driven
// by the manager: submission, polls, the MP4 copied into the blob store,
// billing from the clip length; a moderated video refunded with the policy
// code; a deleted task's video deleted upstream.
var _ = Describe("GenerationTask on OpenAI's Videos API", Ordered, func() {
	const (
		credSecret = "openai-video-keys"
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
		userID, err = ledger.EnsureTenant(ctx, "openai-video-tenant", tenantNS, "acct")
		Expect(err).NotTo(HaveOccurred())
		tokenID, err = ledger.EnsureToken(ctx, store.TokenSpec{UID: "openai-video-token", UserID: userID, Name: "key",
			RemainQuota: 10 * billing.QuotaPerUSD})
		Expect(err).NotTo(HaveOccurred())
		_, err = ledger.ApplyGrant(ctx, userID, "g", 10*billing.QuotaPerUSD)
		Expect(err).NotTo(HaveOccurred())
	})

	newRoute := func(baseURL string) string {
		seq++
		name := fmt.Sprintf("sora-%d", seq)
		Expect(k8s.Create(ctx, &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNS},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(name), Type: v1.ModelTypeVideo, ValidationProfile: v1.ProfileAllInOneVideo,
				Backends: []v1.Backend{{Name: "openai", Provider: "openai", BaseURL: baseURL, UpstreamModel: "sora-2",
					CredentialSecretRef: &v1.SecretKeyRef{Name: credSecret, Key: "apiKey"}}}}})).To(Succeed())
		return name
	}

	// submit does what the gateway does: reserve the estimate, then create
	// the task with its submission record.
	submit := func(route string, duration int64) *v1.GenerationTask {
		taskID := tasks.NewTaskID()
		requestID := "req-" + taskID
		estimate := billing.Quota(duration * 25000)
		Expect(ledger.Reserve(ctx, requestID, tokenID, userID, estimate)).To(Succeed())
		sub := &tasks.Submission{AcceptedAt: time.Now().UnixMilli(), RouteNamespace: systemNS, RouteName: route,
			Backends: []string{"openai"}, PriceNamespace: systemNS, PriceName: route + "-price", TokenDisplay: "key",
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

	It("submits, polls through a 429, copies the MP4 into the blob store and bills the clip once", func() {
		up := fakeupstream.NewOpenAIVideos()
		defer up.Close()
		video := append([]byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"), []byte("sora frames")...)
		up.SetPlan(fakeupstream.VideoPlan{Polls: 2, RateLimited: 1, RetryAfter: "1", Output: video})
		route := newRoute(up.URL + "/v1")
		before := balance()

		t := submit(route, 4)
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskCompleted))

		Expect(up.Count(http.MethodPost, "/v1/videos")).To(Equal(1))
		st := t.Status
		Expect(st.UpstreamTaskID).To(HavePrefix("video_"))
		Expect(up.Count(http.MethodGet, "/v1/videos/"+st.UpstreamTaskID+"/content")).To(Equal(1))
		Expect(up.Count(http.MethodGet, "/v1/videos/")).To(Equal(5)) // one 429, queued, in progress, completed, content
		Expect(st.Progress).To(Equal(int32(100)))
		Expect(st.Result.Type).To(Equal("video"))
		Expect(st.Result.Data).To(HaveLen(1))
		Expect(st.Result.Data[0].URL).To(Equal(tasks.BlobScheme + tasks.BlobKey(tenantNS, t.Spec.TaskID, 0, "mp4")))
		Expect(blobBytes(st.Result.Data[0].URL)).To(Equal(video))

		By("billed once: 4 s at 0.05 USD, settled")
		Expect(st.Billing.Status).To(Equal(v1.BillingSettled))
		Expect(*st.Billing.Quota).To(Equal(int64(100000)))
		rows := usageOf(t.Spec.TaskID)
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].Quota).To(Equal(billing.Quota(100000)))
		Expect(balance().Used - before.Used).To(Equal(billing.Quota(100000)))

		By("the wire request is OpenAI's")
		sent := up.Requests()[0]
		Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + fakeupstream.DefaultKey))
		Expect(sent.JSON()).To(Equal(map[string]any{"model": "sora-2", "prompt": "a lighthouse at dusk", "seconds": "4", "size": "1280x720"}))
	})

	It("refunds a video the upstream's moderation blocked, with the policy code", func() {
		up := fakeupstream.NewOpenAIVideos()
		defer up.Close()
		up.SetPlan(fakeupstream.VideoPlan{Polls: 1, FailCode: "moderation_blocked", FailMessage: "Your request was blocked by our moderation system."})
		route := newRoute(up.URL)
		before := balance()

		t := submit(route, 8)
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Code).To(Equal("content_policy_violation"))
		Expect(t.Status.Error.Message).To(Equal("Your request was blocked by our moderation system."))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(usageOf(t.Spec.TaskID)).To(BeEmpty())
		Expect(balance().Remain).To(Equal(before.Remain))
		Expect(balance().Used).To(Equal(before.Used))
	})

	It("refunds a submission refused for policy, with the policy code", func() {
		up := fakeupstream.NewOpenAIVideos()
		defer up.Close()
		up.Fail(fakeupstream.ImageFailure{Status: http.StatusBadRequest, Code: "content_policy_violation",
			Message: "Your request was rejected as a result of our safety system."})
		route := newRoute(up.URL)
		before := balance()

		t := submit(route, 4)
		Eventually(phaseOf(t), framework.LongTimeout, framework.Interval).Should(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Code).To(Equal("content_policy_violation"))
		Expect(t.Status.Error.Message).To(ContainSubstring("Your request was rejected as a result of our safety system."))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(balance().Remain).To(Equal(before.Remain))
	})

	It("deletes the upstream video of a task deleted before it finished", func() {
		up := fakeupstream.NewOpenAIVideos()
		defer up.Close()
		up.SetPlan(fakeupstream.VideoPlan{Polls: 1000})
		route := newRoute(up.URL)

		t := submit(route, 4)
		Eventually(func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			return t.Status.UpstreamTaskID
		}, framework.LongTimeout, framework.Interval).ShouldNot(BeEmpty())
		id := t.Status.UpstreamTaskID
		Expect(k8s.Delete(ctx, t)).To(Succeed())
		Eventually(func() bool { return up.Deleted(id) }, framework.LongTimeout, framework.Interval).Should(BeTrue())
	})
})
