package controllers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/budget"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

const alertSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is a tenant's webhook on loopback: it keeps every delivery
// and answers 500 to the first failFirst of them.
type hookReceiver struct {
	URL       string
	failFirst atomic.Int32
	mu        sync.Mutex
	got       []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

// alertEvent is a budget alert's webhook body as a receiver reads it.
type alertEvent struct {
	Object, ID, Type string
	CreatedAt        int64 `json:"created_at"`
	Data             struct {
		Object, Namespace, Name string
		UserID                  int64  `json:"user_id"`
		TokenID                 int64  `json:"token_id"`
		TokenName               string `json:"token_name"`
		Threshold               struct {
			Kind    string
			Percent int32
			Credits string
		}
		RemainQuota *int64 `json:"remain_quota"`
		TotalQuota  *int64 `json:"total_quota"`
		UsedQuota   *int64 `json:"used_quota"`
		LimitQuota  *int64 `json:"limit_quota"`
		Window      string
	}
}

func newHookReceiver() *hookReceiver {
	h := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h.mu.Lock()
		h.got = append(h.got, delivery{header: req.Header.Clone(), body: body})
		h.mu.Unlock()
		if h.failFirst.Add(-1) >= 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	DeferCleanup(srv.Close)
	h.URL = srv.URL + "/hooks/budget"
	return h
}

func (h *hookReceiver) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

// events reads every delivery, checking each one's signature the way a
// receiver built on the Standard Webhooks reference library does.
func (h *hookReceiver) events(g Gomega) []alertEvent {
	wh, err := standardwebhooks.NewWebhook(alertSecret)
	g.Expect(err).NotTo(HaveOccurred())
	var out []alertEvent
	for _, d := range h.deliveries() {
		g.Expect(wh.Verify(d.body, d.header)).To(Succeed(), "signed with the tenant's secret")
		var ev alertEvent
		g.Expect(json.Unmarshal(d.body, &ev)).To(Succeed())
		g.Expect(ev.ID).To(Equal(d.header.Get("webhook-id")))
		out = append(out, ev)
	}
	return out
}

// alertNamespace is a spec's namespace with the webhook's signing Secret.
func alertNamespace() string {
	ns := newTenantNamespace()
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
		Data: map[string][]byte{"secret": []byte(alertSecret)}})).To(Succeed())
	return ns
}

func hookSpec(url string) *v1.WebhookSpec {
	return &v1.WebhookSpec{URL: url, MaxAttempts: 3, SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}
}

// alertTenant creates a ready Tenant with a grant of quota, a webhook and
// alerts.
func alertTenant(ns string, quota int64, url string, alerts ...v1.TenantAlert) *v1.Tenant {
	t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns}, Spec: v1.TenantSpec{
		Grants: []v1.Grant{{ID: "welcome", Quota: ptr.To(quota)}}, Webhook: hookSpec(url), Alerts: alerts}}
	Expect(k8s.Create(ctx, t)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		g.Expect(t.Status.AppliedGrants).To(ContainElement("welcome"))
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return t
}

// spender charges a tenant or a key through the ledger, as settled requests do.
type spender struct {
	userID, tokenID int64
	n               *int
}

// ledgerSpender spends on its own unlimited key of the tenant: only the
// tenant's balance moves.
func ledgerSpender(t *v1.Tenant) spender {
	tokenID, err := ledger.EnsureToken(ctx, store.TokenSpec{UID: "spender-" + t.Namespace, UserID: t.Status.UserID,
		Name: "spender", TokenLimits: store.TokenLimits{Unlimited: true}})
	Expect(err).NotTo(HaveOccurred())
	return spender{userID: t.Status.UserID, tokenID: tokenID, n: new(int)}
}

func keySpender(tok *v1.ApiToken) spender {
	return spender{userID: tok.Status.UserID, tokenID: tok.Status.TokenID, n: new(int)}
}

func (s spender) spend(q int64) {
	GinkgoHelper()
	*s.n++
	id := fmt.Sprintf("spend-%d-%d", s.tokenID, *s.n)
	Expect(ledger.Reserve(ctx, id, s.tokenID, s.userID, billing.Quota(q))).To(Succeed())
	Expect(ledger.Settle(ctx, id, billing.Quota(q))).To(Succeed())
}

// hold reserves q for a request in flight (a task), released by refund.
func (s spender) hold(id string, q int64) {
	GinkgoHelper()
	Expect(ledger.Reserve(ctx, fmt.Sprintf("%s-%d", id, s.tokenID), s.tokenID, s.userID, billing.Quota(q))).To(Succeed())
}

func (s spender) refund(id string) {
	GinkgoHelper()
	Expect(ledger.Refund(ctx, fmt.Sprintf("%s-%d", id, s.tokenID))).To(Succeed())
}

// raised counts the Events of reason on the named object (an Event
// repeated in a series counts each time).
func raised(g Gomega, ns, name, reason string) int {
	list := &eventsv1.EventList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

func alertCount(ns, object string, kind budget.Kind) int {
	return int(testutil.ToFloat64(metrics.BudgetAlerts.WithLabelValues(ns, object, string(kind))))
}

// alertState reads the object's status entry for threshold.
func alertState(g Gomega, obj client.Object, threshold string) v1.AlertStatus {
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	var sts []v1.AlertStatus
	switch o := obj.(type) {
	case *v1.Tenant:
		sts = o.Status.Alerts
	case *v1.ApiToken:
		sts = o.Status.Alerts
	}
	for _, st := range sts {
		if st.Threshold == threshold {
			if st.Webhook == nil {
				// Not delivered yet: a poll reads an empty delivery and
				// tries again rather than dereferencing nil.
				st.Webhook = &v1.WebhookDelivery{}
			}
			return st
		}
	}
	return v1.AlertStatus{Webhook: &v1.WebhookDelivery{}}
}

// crossing is one threshold of one object, and how a spec moves its figure.
type crossing struct {
	obj       client.Object
	object    string // the metric's object label
	kind      budget.Kind
	threshold string // its status.alerts name
	eventType string
	reason    string
	// cross takes the figure past the threshold, deeper further past it,
	// rearm back to the safe side and crossAgain past it once more.
	cross, deeper, rearm, crossAgain func()
	// check looks at the event of a crossing.
	check func(g Gomega, ev alertEvent)
}

// expectOncePerCrossing drives c through two crossings and checks that each
// fires once: a Warning Event, one signed webhook and the metric; staying
// past the threshold fires nothing more; going back re-arms it.
func expectOncePerCrossing(c crossing, hook *hookReceiver) {
	ns, name := c.obj.GetNamespace(), c.obj.GetName()
	fired := func(g Gomega, n int) []alertEvent {
		evs := hook.events(g)
		g.Expect(evs).To(HaveLen(n))
		g.Expect(raised(g, ns, name, c.reason)).To(Equal(n))
		g.Expect(alertCount(ns, c.object, c.kind)).To(Equal(n))
		st := alertState(g, c.obj, c.threshold)
		g.Expect(st.State).To(Equal(v1.AlertFired))
		g.Expect(st.Crossings).To(Equal(int32(n)))
		g.Expect(st.Webhook).NotTo(BeNil())
		g.Expect(st.Webhook.State).To(Equal(v1.WebhookDelivered))
		g.Expect(st.Webhook.ID).To(Equal(evs[n-1].ID))
		return evs
	}

	By("crossing the threshold")
	c.cross()
	Eventually(func(g Gomega) {
		ev := fired(g, 1)[0]
		g.Expect(ev.Object).To(Equal("event"))
		g.Expect(ev.Type).To(Equal(c.eventType))
		g.Expect(ev.Data.Object).To(Equal(c.object))
		g.Expect(ev.Data.Namespace).To(Equal(ns))
		g.Expect(ev.Data.Name).To(Equal(name))
		g.Expect(ev.Data.Threshold.Kind).To(Equal(string(c.kind)))
		c.check(g, ev)
	}, framework.Timeout, framework.Interval).Should(Succeed())

	By("staying past it: nothing fires again")
	c.deeper()
	Consistently(func(g Gomega) { fired(g, 1) }, 3*time.Second, 250*time.Millisecond).Should(Succeed())

	By("going back re-arms it")
	c.rearm()
	Eventually(func(g Gomega) {
		g.Expect(alertState(g, c.obj, c.threshold).State).To(Equal(v1.AlertArmed))
	}, framework.Timeout, framework.Interval).Should(Succeed())
	Expect(hook.deliveries()).To(HaveLen(1))

	By("crossing it again fires again, with another event ID")
	c.crossAgain()
	Eventually(func(g Gomega) {
		evs := fired(g, 2)
		g.Expect(evs[1].ID).NotTo(Equal(evs[0].ID))
		c.check(g, evs[1])
	}, framework.Timeout, framework.Interval).Should(Succeed())
}

var _ = Describe("Budget alerts", func() {
	var (
		ns   string
		hook *hookReceiver
	)
	BeforeEach(func() {
		ns = alertNamespace()
		hook = newHookReceiver()
	})

	It("fires a tenant's balance below a percent of its grants once per crossing; a grant re-arms it", func() {
		t := alertTenant(ns, 10_000, hook.URL, v1.TenantAlert{RemainingPercent: ptr.To[int32](20)})
		s := ledgerSpender(t)
		expectOncePerCrossing(crossing{obj: t, object: budget.ObjectTenant, kind: budget.RemainingPercent,
			threshold: "remainingPercent=20", eventType: v1.WebhookEventBalanceLow, reason: v1.EventBalanceLow,
			cross:  func() { s.spend(8_500) }, // 1 500 of 10 000 left
			deeper: func() { s.spend(500) },
			rearm: func() {
				update(t, func(t *v1.Tenant) {
					t.Spec.Grants = append(t.Spec.Grants, v1.Grant{ID: "topup", Quota: ptr.To[int64](10_000)})
				})
			}, // 11 000 of 20 000
			crossAgain: func() { s.spend(8_000) }, // 3 000 of 20 000
			check: func(g Gomega, ev alertEvent) {
				g.Expect(ev.Data.UserID).To(Equal(t.Status.UserID))
				g.Expect(ev.Data.Threshold.Percent).To(Equal(int32(20)))
				g.Expect(*ev.Data.RemainQuota * 5).To(BeNumerically("<", *ev.Data.TotalQuota))
				g.Expect(*ev.Data.TotalQuota).To(BeElementOf(int64(10_000), int64(20_000)))
			},
		}, hook)
	})

	It("fires a tenant's balance below an amount of credits once per crossing; a grant re-arms it", func() {
		t := alertTenant(ns, 10_000, hook.URL, v1.TenantAlert{RemainingCredits: credits("2")}) // 5 000 quota
		s := ledgerSpender(t)
		expectOncePerCrossing(crossing{obj: t, object: budget.ObjectTenant, kind: budget.RemainingCredits,
			threshold: "remainingCredits=2", eventType: v1.WebhookEventBalanceLow, reason: v1.EventBalanceLow,
			cross:  func() { s.spend(6_000) },
			deeper: func() { s.spend(1_000) },
			rearm: func() {
				update(t, func(t *v1.Tenant) {
					t.Spec.Grants = append(t.Spec.Grants, v1.Grant{ID: "topup", Quota: ptr.To[int64](10_000)})
				})
			},
			crossAgain: func() { s.spend(9_000) },
			check: func(g Gomega, ev alertEvent) {
				g.Expect(ev.Data.Threshold.Credits).To(Equal("2"))
				g.Expect(*ev.Data.RemainQuota).To(BeNumerically("<", 5_000))
				g.Expect(ev.Data.TotalQuota).To(BeNil())
			},
		}, hook)
	})

	Context("on a key", func() {
		var tenant *v1.Tenant
		BeforeEach(func() {
			tenant = alertTenant(ns, 10_000_000, hook.URL)
		})
		key := func(spec v1.ApiTokenSpec) *v1.ApiToken {
			spec.DisplayName = "CI key"
			tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: spec}
			Expect(k8s.Create(ctx, tok)).To(Succeed())
			readyToken(tok)
			Eventually(func(g Gomega) { // the first mirror is written
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), tok)).To(Succeed())
				g.Expect(tok.Status.UsageSyncedAt).NotTo(BeNil())
			}, framework.Timeout, framework.Interval).Should(Succeed())
			return tok
		}
		checkKey := func(tok *v1.ApiToken) func(g Gomega, ev alertEvent) {
			return func(g Gomega, ev alertEvent) {
				g.Expect(ev.Data.UserID).To(Equal(tenant.Status.UserID))
				g.Expect(ev.Data.TokenID).To(Equal(tok.Status.TokenID))
				g.Expect(ev.Data.TokenName).To(Equal("CI key"))
			}
		}

		It("fires its balance below a percent of its quota once per crossing; a refund re-arms it", func() {
			tok := key(v1.ApiTokenSpec{Quota: ptr.To[int64](10_000), Alerts: []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](50)}}})
			s := keySpender(tok)
			check := checkKey(tok)
			expectOncePerCrossing(crossing{obj: tok, object: budget.ObjectApiToken, kind: budget.RemainingPercent,
				threshold: "remainingPercent=50", eventType: v1.WebhookEventBalanceLow, reason: v1.EventBalanceLow,
				cross:      func() { s.hold("task", 6_000) }, // a task in flight: 4 000 of 10 000 left
				deeper:     func() { s.spend(500) },
				rearm:      func() { s.refund("task") }, // the task failed: 9 500 left
				crossAgain: func() { s.spend(6_000) },
				check: func(g Gomega, ev alertEvent) {
					check(g, ev)
					g.Expect(*ev.Data.TotalQuota).To(Equal(int64(10_000)), "the key's quota, in flight or spent")
					g.Expect(*ev.Data.RemainQuota).To(BeElementOf(int64(4_000), int64(3_500)), "the balance at the crossing")
				},
			}, hook)
		})

		It("fires its balance below an amount of credits once per crossing; a refund re-arms it", func() {
			tok := key(v1.ApiTokenSpec{Quota: ptr.To[int64](10_000), Alerts: []v1.ApiTokenAlert{{RemainingCredits: credits("2")}}})
			s := keySpender(tok)
			check := checkKey(tok)
			expectOncePerCrossing(crossing{obj: tok, object: budget.ObjectApiToken, kind: budget.RemainingCredits,
				threshold: "remainingCredits=2", eventType: v1.WebhookEventBalanceLow, reason: v1.EventBalanceLow,
				cross:      func() { s.hold("task", 6_000) },
				deeper:     func() { s.spend(500) },
				rearm:      func() { s.refund("task") },
				crossAgain: func() { s.spend(6_000) },
				check: func(g Gomega, ev alertEvent) {
					check(g, ev)
					g.Expect(*ev.Data.RemainQuota).To(BeNumerically("<", 5_000))
				},
			}, hook)
		})

		It("fires its daily limit used to a percent once per crossing; raising the limit re-arms it", func() {
			tok := key(v1.ApiTokenSpec{Quota: ptr.To[int64](1_000_000), DailyQuota: 10_000,
				Alerts: []v1.ApiTokenAlert{{DailyLimitPercent: ptr.To[int32](80)}}})
			s := keySpender(tok)
			check := checkKey(tok)
			expectOncePerCrossing(crossing{obj: tok, object: budget.ObjectApiToken, kind: budget.DailyLimitPercent,
				threshold: "dailyLimitPercent=80", eventType: v1.WebhookEventLimitReached, reason: v1.EventLimitReached,
				cross:      func() { s.spend(8_000) }, // 80% of the day's 10 000
				deeper:     func() { s.spend(500) },
				rearm:      func() { update(tok, func(t *v1.ApiToken) { t.Spec.DailyQuota = 20_000 }) }, // 42%
				crossAgain: func() { s.spend(8_000) },                                                   // 82%
				check: func(g Gomega, ev alertEvent) {
					check(g, ev)
					g.Expect(ev.Data.Window).To(Equal("daily"))
					g.Expect(*ev.Data.UsedQuota * 100).To(BeNumerically(">=", 80**ev.Data.LimitQuota))
				},
			}, hook)
		})

		It("fires its monthly limit used to a percent once per crossing; raising the limit re-arms it", func() {
			tok := key(v1.ApiTokenSpec{Quota: ptr.To[int64](1_000_000), MonthlyQuota: 10_000,
				Alerts: []v1.ApiTokenAlert{{MonthlyLimitPercent: ptr.To[int32](100)}}})
			s := keySpender(tok)
			check := checkKey(tok)
			expectOncePerCrossing(crossing{obj: tok, object: budget.ObjectApiToken, kind: budget.MonthlyLimitPercent,
				threshold: "monthlyLimitPercent=100", eventType: v1.WebhookEventLimitReached, reason: v1.EventLimitReached,
				cross:      func() { s.spend(10_000) }, // the whole month's limit
				deeper:     func() { update(tok, func(t *v1.ApiToken) { t.Spec.MonthlyQuota = 9_000 }) },
				rearm:      func() { update(tok, func(t *v1.ApiToken) { t.Spec.MonthlyQuota = 20_000 }) },
				crossAgain: func() { s.spend(10_000) },
				check: func(g Gomega, ev alertEvent) {
					check(g, ev)
					g.Expect(ev.Data.Window).To(Equal("monthly"))
					g.Expect(*ev.Data.UsedQuota).To(BeNumerically(">=", *ev.Data.LimitQuota))
				},
			}, hook)
		})
	})

	It("retries a delivery the receiver refused with the same event ID", func() {
		hook.failFirst.Store(1)
		t := alertTenant(ns, 10_000, hook.URL, v1.TenantAlert{RemainingPercent: ptr.To[int32](20)})
		ledgerSpender(t).spend(9_000)
		Eventually(func(g Gomega) {
			st := alertState(g, t, "remainingPercent=20")
			g.Expect(st.Webhook).NotTo(BeNil())
			g.Expect(st.Webhook.State).To(Equal(v1.WebhookPending))
			g.Expect(st.Webhook.LastStatusCode).To(Equal(int32(500)))
			g.Expect(st.Webhook.NextAttemptAt).NotTo(BeNil())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			evs := hook.events(g)
			g.Expect(evs).To(HaveLen(2))
			g.Expect(evs[1].ID).To(Equal(evs[0].ID), "the same event: receivers drop duplicates by webhook-id")
			st := alertState(g, t, "remainingPercent=20")
			g.Expect(st.Webhook.State).To(Equal(v1.WebhookDelivered))
			g.Expect(st.Webhook.Attempts).To(Equal(int32(2)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(alertCount(ns, budget.ObjectTenant, budget.RemainingPercent)).To(Equal(1), "one crossing, one alert")
	})

	Context("across a manager restart", Serial, func() {
		var stopped bool
		restart := func() { stopManager(); stopped = true }
		start := func() { startManager(); stopped = false }
		BeforeEach(func() {
			DeferCleanup(func() {
				if stopped { // a spec that failed while no manager ran
					start()
				}
			})
		})

		It("does not fire a crossing again that the stopped manager raised", func() {
			t := alertTenant(ns, 10_000, hook.URL, v1.TenantAlert{RemainingPercent: ptr.To[int32](20)})
			s := ledgerSpender(t)
			s.spend(9_000)
			Eventually(func(g Gomega) {
				g.Expect(hook.events(g)).To(HaveLen(1))
				g.Expect(alertState(g, t, "remainingPercent=20").Webhook.State).To(Equal(v1.WebhookDelivered))
			}, framework.Timeout, framework.Interval).Should(Succeed())

			restart()
			s.spend(100) // a figure moved: the next manager measures and mirrors it
			start()
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
				g.Expect(t.Status.RemainQuota).To(Equal(int64(900)))
			}, framework.Timeout, framework.Interval).Should(Succeed())
			firedOnce := func(g Gomega) {
				g.Expect(hook.events(g)).To(HaveLen(1))
				g.Expect(raised(g, ns, t.Name, v1.EventBalanceLow)).To(Equal(1))
				g.Expect(alertCount(ns, budget.ObjectTenant, budget.RemainingPercent)).To(Equal(1))
				g.Expect(alertState(g, t, "remainingPercent=20").State).To(Equal(v1.AlertFired))
			}
			// The Event is written asynchronously: wait for it before
			// watching that nothing more comes.
			Eventually(firedOnce, framework.Timeout, framework.Interval).Should(Succeed())
			Consistently(firedOnce, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		})

		It("raises once, after the restart, a crossing the stopped manager recorded and one it never saw", func() {
			t := alertTenant(ns, 10_000, hook.URL, v1.TenantAlert{RemainingPercent: ptr.To[int32](20)},
				v1.TenantAlert{RemainingCredits: credits("0.4")}) // 1 000 quota
			s := ledgerSpender(t)
			restart()
			s.spend(8_500)
			// What a manager that stopped between recording the crossing and
			// raising it leaves in status.
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			t.Status.Alerts = []v1.AlertStatus{{Threshold: "remainingPercent=20", State: v1.AlertPending, Crossings: 1,
				CrossedAt: metav1.NewTime(time.Now().Truncate(time.Second)), Quota: 1_500, OfQuota: 10_000}}
			Expect(k8s.Status().Update(ctx, t)).To(Succeed())
			s.spend(700) // and a crossing while no manager ran: 800 left

			start()
			firedBoth := func(g Gomega) {
				evs := hook.events(g)
				g.Expect(evs).To(HaveLen(2))
				var kinds []string
				for _, ev := range evs {
					kinds = append(kinds, ev.Data.Threshold.Kind)
				}
				g.Expect(kinds).To(ConsistOf(string(budget.RemainingPercent), string(budget.RemainingCredits)))
				g.Expect(raised(g, ns, t.Name, v1.EventBalanceLow)).To(Equal(2))
				g.Expect(alertCount(ns, budget.ObjectTenant, budget.RemainingPercent)).To(Equal(1))
				g.Expect(alertCount(ns, budget.ObjectTenant, budget.RemainingCredits)).To(Equal(1))
			}
			// The Events are written asynchronously, after the webhooks may
			// have arrived: wait for all of it, then watch that nothing more comes.
			Eventually(firedBoth, framework.Timeout, framework.Interval).Should(Succeed())
			Consistently(firedBoth, 3*time.Second, 250*time.Millisecond).Should(Succeed())
			Expect(alertState(Default, t, "remainingPercent=20").Quota).To(Equal(int64(1_500)), "the recorded crossing's figures")
		})
	})
})
