package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TenantAlert is one budget threshold of a tenant's balance. Set exactly one
// field. It fires once when the balance crosses it (docs/billing.md, "Alerts").
// +kubebuilder:validation:XValidation:rule="has(self.remainingPercent) != has(self.remainingCredits)",message="set exactly one of remainingPercent or remainingCredits"
type TenantAlert struct {
	// remainingPercent fires when the balance left falls below this percent
	// of what the tenant was granted (the sum of its grants in the ledger).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	RemainingPercent *int32 `json:"remainingPercent,omitempty"`

	// remainingCredits fires when the balance left falls below this many
	// credits (200 credits = 1 USD).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="remainingCredits must be more than 0"
	RemainingCredits *Decimal `json:"remainingCredits,omitempty"`
}

// ApiTokenAlert is one budget threshold of a key: its balance or one of its
// limits. Set exactly one field. It fires once when the figure crosses it
// (docs/billing.md, "Alerts").
// +kubebuilder:validation:XValidation:rule="[has(self.remainingPercent), has(self.remainingCredits), has(self.dailyLimitPercent), has(self.monthlyLimitPercent)].filter(x, x).size() == 1",message="set exactly one of remainingPercent, remainingCredits, dailyLimitPercent or monthlyLimitPercent"
type ApiTokenAlert struct {
	// remainingPercent fires when the key's balance falls below this percent
	// of its quota (what it started with).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	RemainingPercent *int32 `json:"remainingPercent,omitempty"`

	// remainingCredits fires when the key's balance falls below this many
	// credits (200 credits = 1 USD).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="remainingCredits must be more than 0"
	RemainingCredits *Decimal `json:"remainingCredits,omitempty"`

	// dailyLimitPercent fires when the quota used in the current UTC day
	// reaches this percent of dailyQuota (100: the limit is reached).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DailyLimitPercent *int32 `json:"dailyLimitPercent,omitempty"`

	// monthlyLimitPercent fires when the quota used in the current UTC
	// month reaches this percent of monthlyQuota (100: the limit is reached).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MonthlyLimitPercent *int32 `json:"monthlyLimitPercent,omitempty"`
}

// AlertState is where a budget threshold stands.
// +kubebuilder:validation:Enum=Pending;Fired;Armed
type AlertState string

// Alert states. A threshold without a status entry has never fired: it is
// armed.
const (
	// AlertPending: crossed and recorded; the Event, the metric and the
	// webhook follow once the record is stored, so that a restart neither
	// loses nor repeats them.
	AlertPending AlertState = "Pending"
	// AlertFired: crossed and raised. It does not fire again until the
	// figure is back on the safe side.
	AlertFired AlertState = "Fired"
	// AlertArmed: back on the safe side after firing; the next crossing
	// fires again.
	AlertArmed AlertState = "Armed"
)

// AlertStatus is where one threshold of spec.alerts stands, with the figures
// of its last crossing (the webhook sends them, the same on every retry).
type AlertStatus struct {
	// threshold names the spec.alerts entry, as "remainingPercent=20",
	// "remainingCredits=500", "dailyLimitPercent=80" or "monthlyLimitPercent=80".
	// +required
	// +kubebuilder:validation:MaxLength=64
	Threshold string `json:"threshold"`

	// state is Pending, Fired or Armed.
	// +required
	State AlertState `json:"state"`

	// crossings counts the times the threshold was crossed.
	// +optional
	Crossings int32 `json:"crossings,omitempty"`

	// crossedAt is when the last crossing was seen.
	// +required
	CrossedAt metav1.Time `json:"crossedAt"`

	// quota is what the threshold measured at the last crossing: the
	// balance left, or the quota used in the limit's window.
	// +required
	Quota int64 `json:"quota"`

	// ofQuota is what a percent threshold was a percent of at the last
	// crossing: the tenant's grants, the key's quota, or the limit.
	// +optional
	OfQuota int64 `json:"ofQuota,omitempty"`

	// windowStart is the start of the limit's UTC day or month (limit
	// thresholds).
	// +optional
	WindowStart *metav1.Time `json:"windowStart,omitempty"`

	// webhook is the delivery of the last crossing's event to the tenant's
	// webhook; absent when the tenant has none.
	// +optional
	Webhook *WebhookDelivery `json:"webhook,omitempty"`
}
