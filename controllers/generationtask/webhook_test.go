package generationtask_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/tasks"
)

var _ = Describe("GenerationTask webhooks", func() {
	BeforeEach(setUp)

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

			step(t) // archived: Settled
			Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionSettled)).To(BeTrue())
			Expect(meta.FindStatusCondition(t.Status.Conditions, v1.ConditionDelivered).Reason).To(Equal(v1.ReasonWaiting))
			Expect(t.Status.Webhook).To(BeNil(), "the task controller never writes status.webhook")
			res := hook(t) // attempt 1
			Expect(received()).To(HaveLen(1))
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookPending))
			Expect(t.Status.Webhook.LastStatusCode).To(Equal(int32(500)))
			Expect(res.RequeueAfter).To(BeNumerically("~", 5*time.Second, 2*time.Second))
			Expect(hook(t).RequeueAfter).To(BeNumerically(">", 0), "not due yet: no attempt")
			Expect(received()).To(HaveLen(1))

			clk.Step(res.RequeueAfter)
			res = hook(t) // attempt 2
			Expect(received()).To(HaveLen(2))
			Expect(res.RequeueAfter).To(BeNumerically("~", 30*time.Second, 7*time.Second))
			clk.Step(res.RequeueAfter)
			res = hook(t) // attempt 3
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
			Expect(res.RequeueAfter).To(BeZero(), "nothing left to deliver")
			Expect(step(t).RequeueAfter).To(BeNumerically(">", 0))
			Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionDelivered)).To(BeTrue())
			Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue())
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
			hook(t)
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
			step(t) // archived: Settled
			By("the object stays past its retention while the event is pending")
			clk.Step(retention)
			step(t)
			Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			for range 3 {
				res := hook(t)
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
			Expect(ev.Data.Error["code"]).To(Equal(v1.CodeGenerationFailed))
			Expect(ev.Data.Billing).To(Equal(map[string]string{"status": "refunded", "credits": "0", "cost_usd": "0"}))

			Expect(recorded.Events).To(Receive(HavePrefix("Warning " + v1.EventTaskFailed)))
			Expect(recorded.Events).To(Receive(HavePrefix("Warning " + v1.EventWebhookGaveUp)))
			By("given up, the event holds the object no longer: it is past its retention")
			step(t)
			Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(t), &v1.GenerationTask{}))).To(BeTrue())
		})

		It("records a missing signing secret as the delivery error without sending", func() {
			Expect(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}})).To(Succeed())
			t := finishTask("no secret")
			step(t)
			hook(t)
			Expect(received()).To(BeEmpty())
			Expect(t.Status.Webhook.State).To(Equal(v1.WebhookPending))
			Expect(t.Status.Webhook.LastError).To(ContainSubstring("does not exist"))
		})
	})
})
