package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Budget alerts", func() {
	It("a key spent through the gateway below half its quota sends one signed balance.low webhook", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

		var mu sync.Mutex
		var got []struct {
			header http.Header
			body   []byte
		}
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			mu.Lock()
			got = append(got, struct {
				header http.Header
				body   []byte
			}{req.Header.Clone(), body})
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		DeferCleanup(receiver.Close)
		deliveries := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}

		// Every call costs 3 000 quota: 1 000 input tokens at 3 USD and 200
		// output tokens at 15 USD per million.
		up := startFake(t, "anthropic")
		up.SetDefault(fakeupstream.Reply{Text: "ok", Usage: fakeupstream.Usage{InputTokens: 1000, OutputTokens: 200}})
		model := uniqueModel("alerts")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "alerts", "anthropic", up.URL, up.Key(), "up-alerts"))
		perCall := textQuota(1000, 200)
		g.Expect(perCall).To(Equal(int64(3000)))

		g.Expect(stack.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: specNamespace},
			Data: map[string][]byte{"secret": []byte(secret)}})).To(Succeed())
		acct := newAccount(t,
			v1.TenantSpec{Webhook: &v1.WebhookSpec{URL: receiver.URL + "/budget", SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}},
			v1.ApiTokenSpec{Quota: ptr.To(10 * perCall), Alerts: []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](50)}}})
		g.Expect(acct.Namespace).To(Equal(specNamespace))

		By("five calls leave exactly half: not below it, nothing is sent")
		for range 5 {
			ask(t, "messages", false, acct.Key, model, "spend")
		}
		ledgerUsed(t, acct, 5*perCall)
		g.Consistently(deliveries, 2500*time.Millisecond, 100*time.Millisecond).Should(BeZero())

		By("the sixth call crosses it: one webhook within a sync period")
		ask(t, "messages", true, acct.Key, model, "spend")
		ledgerUsed(t, acct, 6*perCall)
		g.Eventually(deliveries, 5*time.Second, 50*time.Millisecond).Should(Equal(1))

		By("more calls below the threshold send nothing more")
		ask(t, "messages", false, acct.Key, model, "spend")
		ledgerUsed(t, acct, 7*perCall)
		g.Consistently(deliveries, 2500*time.Millisecond, 100*time.Millisecond).Should(Equal(1))

		mu.Lock()
		d := got[0]
		mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(wh.Verify(d.body, d.header)).To(Succeed(), "signed with the tenant's secret")
		var ev struct {
			Object, ID, Type string
			Data             struct {
				Object, Namespace, Name string
				UserID                  int64  `json:"user_id"`
				TokenID                 int64  `json:"token_id"`
				TokenName               string `json:"token_name"`
				Threshold               struct {
					Kind    string
					Percent int32
				}
				RemainQuota   int64  `json:"remain_quota"`
				RemainCredits string `json:"remain_credits"`
				TotalQuota    int64  `json:"total_quota"`
			}
		}
		g.Expect(json.Unmarshal(d.body, &ev)).To(Succeed())
		g.Expect(ev.Object).To(Equal("event"))
		g.Expect(ev.Type).To(Equal(v1.WebhookEventBalanceLow))
		g.Expect(ev.ID).To(Equal(d.header.Get("webhook-id")))
		g.Expect(ev.Data.Object).To(Equal(budget.ObjectApiToken))
		g.Expect(ev.Data.Namespace).To(Equal(acct.Namespace))
		g.Expect(ev.Data.Name).To(Equal(acct.Token.Name))
		g.Expect(ev.Data.UserID).To(Equal(acct.Tenant.Status.UserID))
		g.Expect(ev.Data.TokenID).To(Equal(acct.Token.Status.TokenID))
		g.Expect(ev.Data.TokenName).To(Equal(acct.Token.Spec.DisplayName))
		g.Expect(ev.Data.Threshold.Kind).To(Equal(string(budget.RemainingPercent)))
		g.Expect(ev.Data.Threshold.Percent).To(Equal(int32(50)))
		g.Expect(ev.Data.RemainQuota).To(Equal(4*perCall), "the balance when the crossing was measured")
		g.Expect(ev.Data.RemainCredits).To(Equal(billing.Quota(4 * perCall).CreditsString()))
		g.Expect(ev.Data.TotalQuota).To(Equal(10 * perCall))

		By("the key carries the alert's state, a Warning Event and the metric")
		tok := &v1.ApiToken{}
		g.Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(acct.Token), tok)).To(Succeed())
		g.Expect(tok.Status.Alerts).To(HaveLen(1))
		g.Expect(tok.Status.Alerts[0].State).To(Equal(v1.AlertFired))
		g.Expect(tok.Status.Alerts[0].Webhook.State).To(Equal(v1.WebhookDelivered))
		g.Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(stack.Client.List(ctx, list, client.InNamespace(acct.Namespace))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == tok.Name {
					reasons = append(reasons, e.Type+" "+e.Reason)
				}
			}
			g.Expect(reasons).To(ContainElement("Warning " + v1.EventBalanceLow))
		}, 5*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Expect(testutil.ToFloat64(metrics.BudgetAlerts.WithLabelValues(acct.Namespace, budget.ObjectApiToken,
			string(budget.RemainingPercent)))).To(Equal(1.0))
	})
})
