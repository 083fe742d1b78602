package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// Object kinds an alert is about: the event's data.object and the metric's
// object label.
const (
	ObjectTenant   = "tenant"
	ObjectApiToken = "api_token"
)

// Subject is the object whose threshold fired.
type Subject struct {
	// Object is ObjectTenant or ObjectApiToken.
	Object    string
	UID       string
	Namespace string
	Name      string
	UserID    int64
	// TokenID and TokenName (the key's display name) of a key's alert.
	TokenID   int64
	TokenName string
}

// Event is a budget alert's webhook body, in the envelope of the task
// webhooks: {"object": "event", "id", "type", "created_at", "data"}.
type Event struct {
	Object    string    `json:"object"`
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt int64     `json:"created_at"`
	Data      EventData `json:"data"`
}

// EventData says what crossed which threshold, with the figures measured at
// the crossing. Amounts are integer quota and exact credit strings.
type EventData struct {
	// Object is "tenant" or "api_token".
	Object    string `json:"object"`
	Namespace string `json:"namespace"`
	// Name is the Tenant's or the ApiToken's object name.
	Name   string `json:"name"`
	UserID int64  `json:"user_id"`
	// TokenID and TokenName (its display name) of a key.
	TokenID   int64          `json:"token_id,omitempty"`
	TokenName string         `json:"token_name,omitempty"`
	Threshold ThresholdEntry `json:"threshold"`

	// balance.low: the balance left and, for a percent, what it is a
	// percent of (the tenant's grants or the key's quota).
	RemainQuota   *int64 `json:"remain_quota,omitempty"`
	RemainCredits string `json:"remain_credits,omitempty"`
	TotalQuota    *int64 `json:"total_quota,omitempty"`
	TotalCredits  string `json:"total_credits,omitempty"`

	// limit.reached: the window ("daily" or "monthly", its start in Unix
	// seconds), the quota used in it and the limit.
	Window       string `json:"window,omitempty"`
	WindowStart  int64  `json:"window_start,omitempty"`
	UsedQuota    *int64 `json:"used_quota,omitempty"`
	UsedCredits  string `json:"used_credits,omitempty"`
	LimitQuota   *int64 `json:"limit_quota,omitempty"`
	LimitCredits string `json:"limit_credits,omitempty"`
}

// ThresholdEntry is the threshold as data: its kind and its value.
type ThresholdEntry struct {
	Kind    Kind   `json:"kind"`
	Percent int32  `json:"percent,omitempty"`
	Credits string `json:"credits,omitempty"`
}

// EventID is the webhook-id of a crossing, derived from what status.alerts
// stores of it: the same on every retry and after a restart, and another
// one for every crossing.
func EventID(s Subject, st v1.AlertStatus) string {
	sum := sha256.Sum256([]byte(s.UID + "\x00" + st.Threshold + "\x00" + strconv.Itoa(int(st.Crossings)) + "\x00" +
		strconv.FormatInt(st.CrossedAt.Unix(), 10)))
	return "evt_" + hex.EncodeToString(sum[:16])
}

// NewEvent is the webhook body of the crossing st records: built from
// status alone, so every retry sends the same bytes.
func NewEvent(s Subject, t Threshold, st v1.AlertStatus) Event {
	d := EventData{Object: s.Object, Namespace: s.Namespace, Name: s.Name, UserID: s.UserID,
		TokenID: s.TokenID, TokenName: s.TokenName, Threshold: entry(t)}
	q, of := billing.Quota(st.Quota), billing.Quota(st.OfQuota)
	switch {
	case t.OnLimit():
		d.Window = "daily"
		if t.Kind == MonthlyLimitPercent {
			d.Window = "monthly"
		}
		if st.WindowStart != nil {
			d.WindowStart = st.WindowStart.Unix()
		}
		d.UsedQuota, d.UsedCredits = int64p(st.Quota), q.CreditsString()
		d.LimitQuota, d.LimitCredits = int64p(st.OfQuota), of.CreditsString()
	default:
		d.RemainQuota, d.RemainCredits = int64p(st.Quota), q.CreditsString()
		if t.Kind == RemainingPercent {
			d.TotalQuota, d.TotalCredits = int64p(st.OfQuota), of.CreditsString()
		}
	}
	return Event{Object: "event", ID: EventID(s, st), Type: t.EventType(), CreatedAt: st.CrossedAt.Unix(), Data: d}
}

// Note is the Kubernetes Event's note of a crossing.
func Note(t Threshold, st v1.AlertStatus) string {
	q, of := billing.Quota(st.Quota), billing.Quota(st.OfQuota)
	switch {
	case t.OnLimit():
		since := ""
		if st.WindowStart != nil {
			since = " since " + st.WindowStart.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s: %d of %d quota used%s", t.Describe(), st.Quota, st.OfQuota, since)
	case t.Kind == RemainingPercent:
		return fmt.Sprintf("%s: %d quota (%s credits) left of %d (%s credits)", t.Describe(), st.Quota, q.CreditsString(), st.OfQuota, of.CreditsString())
	default:
		return fmt.Sprintf("%s: %d quota (%s credits) left", t.Describe(), st.Quota, q.CreditsString())
	}
}

func entry(t Threshold) ThresholdEntry {
	e := ThresholdEntry{Kind: t.Kind, Percent: t.Percent}
	if t.Kind == RemainingCredits {
		e.Percent, e.Credits = 0, plain(t.Credits)
	}
	return e
}

func int64p(v int64) *int64 { return &v }
