package budget

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

func credits(s string) *v1.Decimal { d := v1.Decimal(s); return &d }

func TestThresholdsFromTheSpec(t *testing.T) {
	g := NewWithT(t)
	ts := ForToken([]v1.ApiTokenAlert{
		{RemainingPercent: ptr.To[int32](20)}, {RemainingCredits: credits("500.50")},
		{DailyLimitPercent: ptr.To[int32](80)}, {MonthlyLimitPercent: ptr.To[int32](100)},
		{RemainingCredits: credits("500.5")}, // the same amount spelt otherwise
	})
	var ids []string
	for _, th := range ts {
		ids = append(ids, th.ID())
	}
	g.Expect(ids).To(Equal([]string{"remainingPercent=20", "remainingCredits=500.5", "dailyLimitPercent=80", "monthlyLimitPercent=100"}))
	g.Expect(ts[0].EventType()).To(Equal(v1.WebhookEventBalanceLow))
	g.Expect(ts[1].Reason()).To(Equal(v1.EventBalanceLow))
	g.Expect(ts[2].EventType()).To(Equal(v1.WebhookEventLimitReached))
	g.Expect(ts[3].Reason()).To(Equal(v1.EventLimitReached))
	g.Expect(ForTenant([]v1.TenantAlert{{RemainingCredits: credits("12")}})[0].ID()).To(Equal("remainingCredits=12"))
}

func TestRead(t *testing.T) {
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	pct := func(k Kind, p int32) Threshold { return Threshold{Kind: k, Percent: p} }
	cr := func(s string) Threshold { return ForTenant([]v1.TenantAlert{{RemainingCredits: credits(s)}})[0] }
	tests := []struct {
		name    string
		t       Threshold
		f       Figures
		crossed bool
	}{
		{"20% of 1000 is 200: 199 left is below", pct(RemainingPercent, 20), Figures{Remain: 199, Total: 1000}, true},
		{"200 left is not below 20% of 1000", pct(RemainingPercent, 20), Figures{Remain: 200, Total: 1000}, false},
		{"an overdrawn balance is below", pct(RemainingPercent, 20), Figures{Remain: -5, Total: 1000}, true},
		{"nothing granted: no percent applies", pct(RemainingPercent, 20), Figures{Remain: 0, Total: 0}, false},
		{"unlimited: no balance threshold applies", pct(RemainingPercent, 20), Figures{Unlimited: true, Remain: 0, Total: 1000}, false},
		{"a huge total does not overflow", pct(RemainingPercent, 99), Figures{Remain: 9e18 - 1, Total: 9e18}, false},
		{"2 credits are 5000 quota: 4999 is below", cr("2"), Figures{Remain: 4999}, true},
		{"5000 is not below 2 credits", cr("2"), Figures{Remain: 5000}, false},
		{"0.0004 credits are 1 quota: 0 is below", cr("0.0004"), Figures{Remain: 0}, true},
		{"unlimited: no credits threshold", cr("2"), Figures{Unlimited: true}, false},
		{"80% of a 1000 day is reached at 800", pct(DailyLimitPercent, 80), Figures{Day: Window{Start: day, Used: 800, Limit: 1000}}, true},
		{"799 of 1000 is not 80%", pct(DailyLimitPercent, 80), Figures{Day: Window{Start: day, Used: 799, Limit: 1000}}, false},
		{"the monthly threshold reads the month", pct(MonthlyLimitPercent, 50), Figures{Day: Window{Used: 900, Limit: 1000}, Month: Window{Used: 10, Limit: 1000}}, false},
		{"no limit: no limit threshold", pct(DailyLimitPercent, 80), Figures{Day: Window{Used: 900}}, false},
		{"100% is the limit itself", pct(MonthlyLimitPercent, 100), Figures{Month: Window{Used: 1000, Limit: 1000}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.t.Read(tt.f).Crossed).To(Equal(tt.crossed))
		})
	}
}

func TestNextFiresOncePerCrossing(t *testing.T) {
	g := NewWithT(t)
	ts := ForTenant([]v1.TenantAlert{{RemainingPercent: ptr.To[int32](20)}, {RemainingCredits: credits("0.04")}})
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	states := func(sts []v1.AlertStatus) map[string]v1.AlertState {
		out := map[string]v1.AlertState{}
		for _, st := range sts {
			out[st.Threshold] = st.State
		}
		return out
	}

	sts := Next(ts, nil, Figures{Remain: 900, Total: 1000}, now)
	g.Expect(sts).To(BeEmpty(), "nothing crossed: nothing recorded")

	sts = Next(ts, sts, Figures{Remain: 150, Total: 1000}, now)
	g.Expect(sts).To(HaveLen(1))
	g.Expect(sts[0]).To(Equal(v1.AlertStatus{Threshold: "remainingPercent=20", State: v1.AlertPending, Crossings: 1,
		CrossedAt: sts[0].CrossedAt, Quota: 150, OfQuota: 1000}))
	g.Expect(sts[0].CrossedAt.Time).To(Equal(now))

	// Pending until the caller raised it, however often it is measured.
	g.Expect(Next(ts, sts, Figures{Remain: 900, Total: 1000}, now)).To(Equal(sts))
	sts[0].State = v1.AlertFired

	// Still below, lower still: no new crossing.
	later := now.Add(time.Minute)
	again := Next(ts, sts, Figures{Remain: 100, Total: 1000}, later)
	g.Expect(again).To(Equal(sts))

	// Below the credits threshold (100 quota) too: a crossing of its own.
	again = Next(ts, sts, Figures{Remain: 99, Total: 1500}, later)
	g.Expect(states(again)).To(Equal(map[string]v1.AlertState{"remainingPercent=20": v1.AlertFired, "remainingCredits=0.04": v1.AlertPending}))

	// A grant lifts the balance above 20%: re-armed, figures of the last crossing kept.
	sts = Next(ts, sts, Figures{Remain: 1150, Total: 2000}, later)
	g.Expect(sts).To(HaveLen(1))
	g.Expect(sts[0].State).To(Equal(v1.AlertArmed))
	g.Expect(sts[0].Quota).To(Equal(int64(150)))

	// Crossed again: the second crossing.
	sts = Next(ts, sts, Figures{Remain: 300, Total: 2000}, later)
	g.Expect(sts[0].State).To(Equal(v1.AlertPending))
	g.Expect(sts[0].Crossings).To(Equal(int32(2)))
	g.Expect(sts[0].CrossedAt.Time).To(Equal(later))

	// A threshold gone from the spec is dropped.
	g.Expect(Next(ts[1:], sts, Figures{Remain: 300, Total: 2000}, later)).To(BeEmpty())
}

func TestNextRearmsALimitInANewWindow(t *testing.T) {
	g := NewWithT(t)
	ts := []Threshold{{Kind: DailyLimitPercent, Percent: 80}}
	today := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	tomorrow := today.AddDate(0, 0, 1)
	sts := Next(ts, nil, Figures{Day: Window{Start: today, Used: 900, Limit: 1000}}, today.Add(20*time.Hour))
	g.Expect(sts[0].State).To(Equal(v1.AlertPending))
	g.Expect(sts[0].WindowStart.Time).To(Equal(today))
	sts[0].State = v1.AlertFired

	// The next day starts from nothing: re-armed.
	next := Next(ts, sts, Figures{Day: Window{Start: tomorrow, Used: 0, Limit: 1000}}, tomorrow.Add(time.Hour))
	g.Expect(next[0].State).To(Equal(v1.AlertArmed))
	// A day that is past the threshold at its first look is a crossing of its own.
	next = Next(ts, sts, Figures{Day: Window{Start: tomorrow, Used: 950, Limit: 1000}}, tomorrow.Add(time.Hour))
	g.Expect(next[0].State).To(Equal(v1.AlertPending))
	g.Expect(next[0].Crossings).To(Equal(int32(2)))
	g.Expect(next[0].WindowStart.Time).To(Equal(tomorrow))
}

func TestEventIsBuiltFromStatusAlone(t *testing.T) {
	g := NewWithT(t)
	s := Subject{Object: ObjectApiToken, UID: "uid-1", Namespace: "acme", Name: "ci", UserID: 8, TokenID: 7, TokenName: "CI key"}
	th := Threshold{Kind: DailyLimitPercent, Percent: 80}
	start := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	st := Next([]Threshold{th}, nil, Figures{Day: Window{Start: start, Used: 410_000, Limit: 500_000}}, start.Add(time.Hour))[0]

	ev := NewEvent(s, th, st)
	body, err := json.Marshal(ev)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(MatchJSON(`{"object":"event","id":"` + ev.ID + `","type":"limit.reached","created_at":` +
		jsonInt(start.Add(time.Hour).Unix()) + `,"data":{"object":"api_token","namespace":"acme","name":"ci","user_id":8,"token_id":7,
		"token_name":"CI key","threshold":{"kind":"daily_limit_percent","percent":80},"window":"daily","window_start":` + jsonInt(start.Unix()) + `,
		"used_quota":410000,"used_credits":"164","limit_quota":500000,"limit_credits":"200"}}`))
	g.Expect(ev.ID).To(MatchRegexp(`^evt_[0-9a-f]{32}$`))

	// The same status gives the same event (a retry, a restart); the next crossing another ID.
	g.Expect(NewEvent(s, th, *st.DeepCopy())).To(Equal(ev))
	second := st
	second.Crossings++
	g.Expect(EventID(s, second)).NotTo(Equal(ev.ID))
	g.Expect(EventID(Subject{UID: "uid-2"}, st)).NotTo(Equal(ev.ID), "another object")

	bal := Threshold{Kind: RemainingPercent, Percent: 20}
	low := Next([]Threshold{bal}, nil, Figures{Remain: -2500, Total: billing.QuotaPerUSD}, start)[0]
	d := NewEvent(Subject{Object: ObjectTenant, UID: "t"}, bal, low).Data
	g.Expect(*d.RemainQuota).To(Equal(int64(-2500)))
	g.Expect(d.RemainCredits).To(Equal("-1"), "overdrawn by the last request")
	g.Expect(d.TotalCredits).To(Equal("200"))
	g.Expect(d.UsedQuota).To(BeNil())
	g.Expect(Note(bal, low)).To(Equal("balance below 20% of its total: -2500 quota (-1 credits) left of 500000 (200 credits)"))
	g.Expect(Note(th, st)).To(Equal("daily use at 80% of the daily limit: 410000 of 500000 quota used since 2026-03-10T00:00:00Z"))
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }
