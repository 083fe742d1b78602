package upstreamenv_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/controllers/internal/tasktest"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestUpstreamPollWait(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		elapsed, retryAfter time.Duration
		j                   float64
		want                time.Duration
	}{
		{0, 0, 0, s}, // the floor
		{0, 0, 0.99, s + 196*time.Millisecond},
		{10 * s, 0, 0.5, 5 * s},         // half the time waited
		{10 * s, 0, 0, 4 * s},           // jitter down 20 %
		{time.Hour, 0, 0.99, 30 * s},    // the ceiling holds with jitter
		{4 * s, 25 * s, 0.5, 25 * s},    // Retry-After wins when longer
		{time.Hour, 2 * s, 0.5, 30 * s}, // … and not when shorter
	} {
		if got := generationtask.UpstreamPollWait(c.elapsed, c.retryAfter, s, 30*s, c.j); got != c.want {
			t.Errorf("UpstreamPollWait(%s, %s, j=%v) = %s, want %s", c.elapsed, c.retryAfter, c.j, got, c.want)
		}
	}
}

// These specs drive the reconciler step by step with a fake clock on a fake
// API client (no manager races them), against the fake upstreams and the
// suite's real ledger and blob store.
var _ = Describe("GenerationTask reconciler on upstream adapters", func() {
	const price = "0.04" // USD per image: 20 000 quota
	var (
		clk             *clocktesting.FakeClock
		c               client.Client
		r               *generationtask.Reconciler
		images          *fakeupstream.OpenAIImages
		taskAPI         *fakeupstream.TaskAPI
		userID, tokenID int64
		seq             int
	)

	BeforeEach(func() {
		seq++
		var err error
		userID, err = ledger.EnsureTenant(ctx, fmt.Sprintf("rec-tenant-%d", seq), "rec-tenant", "acct")
		Expect(err).NotTo(HaveOccurred())
		tokenID, err = ledger.EnsureToken(ctx, store.TokenSpec{UID: fmt.Sprintf("rec-token-%d", seq), UserID: userID,
			Name: "key", RemainQuota: billing.QuotaPerUSD})
		Expect(err).NotTo(HaveOccurred())
		_, err = ledger.ApplyGrant(ctx, userID, "g", billing.QuotaPerUSD)
		Expect(err).NotTo(HaveOccurred())

		images, taskAPI = fakeupstream.NewOpenAIImages(), fakeupstream.NewTaskAPI()
		DeferCleanup(images.Close)
		DeferCleanup(taskAPI.Close)
		clk = clocktesting.NewFakeClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
		cred := &v1.SecretKeyRef{Name: "keys", Key: "apiKey"}
		route := &v1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: systemNS},
			Spec: v1.ModelRouteSpec{Model: "img", Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileMultiImage,
				Backends: []v1.Backend{
					{Name: "oa", Provider: "openai", BaseURL: images.URL + "/v1", UpstreamModel: "gpt-image-1", CredentialSecretRef: cred},
					{Name: "ta", Provider: "taskapi", BaseURL: taskAPI.URL, CredentialSecretRef: cred,
						Options: map[string]string{"timeout": "10m"}},
					{Name: "nokey", Provider: "taskapi", BaseURL: taskAPI.URL,
						CredentialSecretRef: &v1.SecretKeyRef{Name: "missing", Key: "apiKey"}},
				}},
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: systemNS},
			Data: map[string][]byte{"apiKey": []byte(fakeupstream.DefaultKey)}}
		scheme := runtime.NewScheme()
		Expect(v1.AddToScheme(scheme)).To(Succeed())
		Expect(corev1.AddToScheme(scheme)).To(Succeed())
		c = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.GenerationTask{}).
			WithObjects(route, secret).Build()
		// The fakes listen on loopback, which the process's guard allows here.
		egress := upstream.NewEgress(upstream.EgressOptions{Guard: env.Guard, RootCAs: fakeupstream.RootCAs()})
		r = &generationtask.Reconciler{Client: c, Ledger: ledger, Upstreams: builtin.Registry(egress), Blobs: blobs, Clock: clk,
			Downloads: egress.Downloads}
	})

	submit := func(request string, n int64, backends ...string) *v1.GenerationTask {
		t, err := tasktest.Submit(ctx, c, ledger, tasktest.Task{Namespace: "rec-tenant", RouteNamespace: systemNS,
			Request: request, N: n, UnitPrice: price, Backends: backends, TokenID: tokenID, UserID: userID, Accepted: clk.Now()})
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

	posts := func() int {
		n := 0
		for _, q := range taskAPI.Requests() {
			if q.Method == http.MethodPost {
				n++
			}
		}
		return n
	}

	It("completes an OpenAI image task in one call, storing the base64 images as ours", func() {
		t := submit(`{"model":"img","prompt":"two lamps","n":2,"size":"1:1"}`, 2, "oa")
		step(t) // queued
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskCompleted))
		Expect(t.Status.Backend).To(Equal("oa"))
		Expect(t.Status.Result.Data).To(HaveLen(2))
		for i, d := range t.Status.Result.Data {
			Expect(d.URL).To(Equal(tasks.BlobScheme + tasks.BlobKey("rec-tenant", t.Spec.TaskID, i, "png")))
			Expect(blobBytes(d.URL)).To(Equal(images.Image(i)))
		}
		Expect(*t.Status.Billing.Quota).To(Equal(int64(40000)))
		Expect(balance().Used).To(Equal(billing.Quota(40000)))
		Expect(images.Requests()).To(HaveLen(1))
		Expect(images.Requests()[0].JSON()).To(HaveKeyWithValue("size", "1024x1024"))
	})

	It("polls on a growing, jittered interval, honours Retry-After, and writes progress only at polls", func() {
		taskAPI.SetPlan(fakeupstream.TaskPlan{RateLimited: 1, RetryAfter: "25", Polls: 1})
		t := submit(`{"model":"img","prompt":"a fox","n":1}`, 1, "ta")
		step(t)
		res := step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(t.Status.UpstreamTaskID).NotTo(BeEmpty())
		Expect(t.Status.StartedAt.Time).To(BeTemporally("==", clk.Now()))
		Expect(t.Status.NextPollAt.Sub(clk.Now())).To(BeNumerically("~", 1500*time.Millisecond, 500*time.Millisecond))
		Expect(res.RequeueAfter).To(Equal(t.Status.NextPollAt.Sub(clk.Now())))
		Expect(taskAPI.Polls()).To(Equal(0))

		By("a poll answered 429 waits for its Retry-After")
		clk.SetTime(t.Status.NextPollAt.Time)
		step(t)
		Expect(taskAPI.Polls()).To(Equal(1))
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		wait := t.Status.NextPollAt.Sub(clk.Now())
		Expect(wait).To(BeNumerically(">=", 25*time.Second))
		Expect(wait).To(BeNumerically("<=", 26*time.Second))

		By("a wake-up before the poll neither polls nor writes")
		clk.Step(10 * time.Second)
		rv := t.ResourceVersion
		step(t)
		Expect(taskAPI.Polls()).To(Equal(1))
		Expect(t.ResourceVersion).To(Equal(rv))

		clk.SetTime(t.Status.NextPollAt.Time)
		step(t)
		Expect(t.Status.Progress).To(Equal(int32(50)))
		clk.SetTime(t.Status.NextPollAt.Time)
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskCompleted))
		Expect(taskAPI.Submissions()).To(Equal(1))
		Expect(balance().Used).To(Equal(billing.Quota(20000)))
	})

	It("fails and refunds a task the upstream does not finish within the backend's timeout", func() {
		before := balance()
		taskAPI.SetPlan(fakeupstream.TaskPlan{Polls: 1000})
		t := submit(`{"model":"img","prompt":"slow","n":1}`, 1, "ta")
		step(t)
		step(t)
		for range 5 {
			clk.SetTime(t.Status.NextPollAt.Time)
			step(t)
		}
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		clk.SetTime(t.Status.StartedAt.Add(10 * time.Minute))
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
		Expect(t.Status.Error.Message).To(ContainSubstring("did not finish the task within 10m0s"))
		Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(balance().Remain).To(Equal(before.Remain))
	})

	It("waits out a 429 on submit before trying the only backend again, and fails a 400 at once", func() {
		taskAPI.FailSubmits(fakeupstream.SubmitFailure{Status: http.StatusTooManyRequests, RetryAfter: "40"})
		t := submit(`{"model":"img","prompt":"later","n":1}`, 1, "ta")
		step(t)
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
		Expect(t.Status.Attempts).To(Equal(int32(1)))
		Expect(t.Status.NextPollAt.Sub(clk.Now())).To(BeNumerically(">=", 40*time.Second))
		clk.Step(20 * time.Second)
		step(t)
		Expect(posts()).To(Equal(1))
		clk.SetTime(t.Status.NextPollAt.Time)
		step(t)
		Expect(posts()).To(Equal(2))
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(t.Status.Attempts).To(Equal(int32(2)))

		before := balance()
		taskAPI.FailSubmits(fakeupstream.SubmitFailure{Status: http.StatusBadRequest, Message: "prompt contains blocked words"})
		bad := submit(`{"model":"img","prompt":"blocked","n":1}`, 1, "ta", "oa")
		step(bad)
		step(bad)
		Expect(bad.Status.Phase).To(Equal(v1.TaskFailed))
		Expect(bad.Status.Error.Message).To(Equal("the upstream rejected the request: prompt contains blocked words"))
		Expect(bad.Status.Billing.Status).To(Equal(v1.BillingRefunded))
		Expect(images.Requests()).To(BeEmpty()) // a refused request is not tried elsewhere
		Expect(balance().Remain).To(Equal(before.Remain))
	})

	It("skips a backend whose credential Secret is missing and a connection that is refused", func() {
		route := &v1.ModelRoute{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "img"}, route)).To(Succeed())
		route.Spec.Backends = append(route.Spec.Backends, v1.Backend{Name: "down", Provider: "taskapi",
			BaseURL: fakeupstream.RefusedURL()})
		Expect(c.Update(ctx, route)).To(Succeed())
		t := submit(`{"model":"img","prompt":"x","n":1}`, 1, "nokey", "down", "ta")
		step(t)
		step(t)
		Expect(t.Status.Backend).To(Equal("down"))
		Expect(t.Status.Attempts).To(Equal(int32(0))) // nothing was sent
		step(t)
		Expect(t.Status.Backend).To(Equal("ta"))
		Expect(t.Status.Attempts).To(Equal(int32(1)))
		step(t)
		Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		Expect(t.Status.Attempts).To(Equal(int32(2)))
		Expect(taskAPI.Submissions()).To(Equal(1))
	})
})
