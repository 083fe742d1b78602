package budget

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// Kind is what a threshold measures. Its values are the metric's label.
type Kind string

// Threshold kinds, one per field of an alert.
const (
	// RemainingPercent: the balance left below a percent of the total.
	RemainingPercent Kind = "remaining_percent"
	// RemainingCredits: the balance left below an amount of credits.
	RemainingCredits Kind = "remaining_credits"
	// DailyLimitPercent: a key's use in the UTC day at a percent of its daily limit.
	DailyLimitPercent Kind = "daily_limit_percent"
	// MonthlyLimitPercent: a key's use in the UTC month at a percent of its monthly limit.
	MonthlyLimitPercent Kind = "monthly_limit_percent"
)

// Threshold is one entry of spec.alerts.
type Threshold struct {
	Kind Kind
	// Percent of the percent kinds.
	Percent int32
	// Credits of RemainingCredits.
	Credits decimal.Decimal
}

// ID names the threshold in status.alerts, spelled as the spec field, with
// the amount in canonical form ("remainingCredits=0.5" for "0.50").
func (t Threshold) ID() string {
	switch t.Kind {
	case RemainingPercent:
		return "remainingPercent=" + strconv.Itoa(int(t.Percent))
	case RemainingCredits:
		return "remainingCredits=" + plain(t.Credits)
	case DailyLimitPercent:
		return "dailyLimitPercent=" + strconv.Itoa(int(t.Percent))
	default:
		return "monthlyLimitPercent=" + strconv.Itoa(int(t.Percent))
	}
}

// OnLimit reports whether the threshold measures a limit, not the balance.
func (t Threshold) OnLimit() bool {
	return t.Kind == DailyLimitPercent || t.Kind == MonthlyLimitPercent
}

// EventType is the type of the threshold's webhook event.
func (t Threshold) EventType() string {
	if t.OnLimit() {
		return v1.WebhookEventLimitReached
	}
	return v1.WebhookEventBalanceLow
}

// Reason is the reason of the threshold's Kubernetes Event.
func (t Threshold) Reason() string {
	if t.OnLimit() {
		return v1.EventLimitReached
	}
	return v1.EventBalanceLow
}

// ForTenant reads a Tenant's spec.alerts. A threshold repeated in another
// spelling ("500" and "500.0" credits) is one threshold.
func ForTenant(alerts []v1.TenantAlert) []Threshold {
	var out thresholds
	for _, a := range alerts {
		out.add(RemainingPercent, a.RemainingPercent, nil)
		out.add(RemainingCredits, nil, a.RemainingCredits)
	}
	return out
}

// ForToken reads an ApiToken's spec.alerts, as ForTenant does.
func ForToken(alerts []v1.ApiTokenAlert) []Threshold {
	var out thresholds
	for _, a := range alerts {
		out.add(RemainingPercent, a.RemainingPercent, nil)
		out.add(RemainingCredits, nil, a.RemainingCredits)
		out.add(DailyLimitPercent, a.DailyLimitPercent, nil)
		out.add(MonthlyLimitPercent, a.MonthlyLimitPercent, nil)
	}
	return out
}

type thresholds []Threshold

// add appends the threshold a field sets, unless the list has it. A credit
// amount the schema let through always parses; one that does not is left out.
func (ts *thresholds) add(kind Kind, percent *int32, credits *v1.Decimal) {
	t := Threshold{Kind: kind}
	switch {
	case percent != nil:
		t.Percent = *percent
	case credits != nil:
		d, err := decimal.NewFromString(string(*credits))
		if err != nil {
			return
		}
		t.Credits = d
	default:
		return
	}
	for _, have := range *ts {
		if have.ID() == t.ID() {
			return
		}
	}
	*ts = append(*ts, t)
}

// Figures are the ledger's figures of a tenant or a key at one moment.
type Figures struct {
	// Unlimited: the balance is not debited, so no balance threshold applies.
	Unlimited bool
	// Remain is the balance left (leases included: held, not spent).
	Remain billing.Quota
	// Total is what the balance was given: a tenant's grants, a key's quota.
	Total billing.Quota
	// Day and Month are a key's limit windows (zero for a tenant).
	Day, Month Window
}

// Window is a key's use of one UTC day or month against its limit.
type Window struct {
	Start time.Time
	// Used is the quota spent or in flight in the window.
	Used billing.Quota
	// Limit is the window's cap; 0 means none.
	Limit billing.Quota
}

// Reading is what a threshold measures in the figures.
type Reading struct {
	// Crossed: the figure is past the threshold.
	Crossed bool
	// Quota is the balance left, or the quota used in the window.
	Quota billing.Quota
	// Of is what a percent is of: the total, or the limit.
	Of billing.Quota
	// WindowStart is the limit's window (limit thresholds).
	WindowStart time.Time
}

// Read measures the threshold. A threshold that cannot apply (an unlimited
// balance, nothing granted, no limit) is never crossed.
func (t Threshold) Read(f Figures) Reading {
	switch t.Kind {
	case RemainingPercent:
		r := Reading{Quota: f.Remain, Of: f.Total}
		r.Crossed = !f.Unlimited && f.Total > 0 && below(f.Remain, percentOf(f.Total, t.Percent))
		return r
	case RemainingCredits:
		r := Reading{Quota: f.Remain}
		r.Crossed = !f.Unlimited && below(f.Remain, t.Credits.Mul(decimal.NewFromInt(billing.QuotaPerCredit)))
		return r
	default:
		w := f.Day
		if t.Kind == MonthlyLimitPercent {
			w = f.Month
		}
		r := Reading{Quota: w.Used, Of: w.Limit, WindowStart: w.Start}
		r.Crossed = w.Limit > 0 && !below(w.Used, percentOf(w.Limit, t.Percent))
		return r
	}
}

// percentOf is p percent of q, exactly (no rounding, no overflow).
func percentOf(q billing.Quota, p int32) decimal.Decimal {
	return decimal.NewFromInt(int64(q)).Mul(decimal.NewFromInt(int64(p))).Shift(-2)
}

// plain writes a spec's credit amount without an exponent or trailing
// zeros (the schema allows at most 12 decimals).
func plain(d decimal.Decimal) string {
	s := d.StringFixed(12)
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func below(q billing.Quota, bound decimal.Decimal) bool {
	return decimal.NewFromInt(int64(q)).LessThan(bound)
}

// Describe says in words what the threshold measures, for Event notes.
func (t Threshold) Describe() string {
	switch t.Kind {
	case RemainingPercent:
		return fmt.Sprintf("balance below %d%% of its total", t.Percent)
	case RemainingCredits:
		return fmt.Sprintf("balance below %s credits", plain(t.Credits))
	case DailyLimitPercent:
		return fmt.Sprintf("daily use at %d%% of the daily limit", t.Percent)
	default:
		return fmt.Sprintf("monthly use at %d%% of the monthly limit", t.Percent)
	}
}
