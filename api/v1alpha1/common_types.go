package v1alpha1

// Decimal is a non-negative decimal number written as a string, such as
// "0.03" or "12". Money is never a float: prices and credits are exact
// decimals, converted to integer quota units with one rounding rule
// (see docs/billing.md).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=28
// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,15}([.][0-9]{1,12})?$')",message="must be a non-negative decimal string such as \"0.03\" (digits, an optional dot and at most 12 decimals)"
type Decimal string

// SecretKeyRef names one key of a Secret in the object's own namespace.
type SecretKeyRef struct {
	// name is the name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the key inside the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// GroupName is a routing (channel) group name such as "default" or "vip".
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
type GroupName string

// ModelID is a model identifier as clients send it in `model`, such as
// "gpt-4o" or "claude-sonnet-4-5". It is data, never a constant in code.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:/@+-]*$`
type ModelID string

// Condition types and reasons shared by every kind.
const (
	// ConditionReady is True when the object is fully reconciled and usable.
	ConditionReady = "Ready"

	// ReasonReconciled: the last reconcile succeeded.
	ReasonReconciled = "Reconciled"
	// ReasonInvalidSpec: the spec is valid for the schema but not usable
	// (for example a missing Secret); the message says what to fix.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonLedgerUnavailable: the database could not be reached; retried.
	ReasonLedgerUnavailable = "LedgerUnavailable"
	// LedgerFinalizer holds Tenants, ApiTokens and GenerationTasks until
	// their money is settled: a deleted task's reservation refunded, a
	// deleted key disabled and its leases returned (docs/controllers.md,
	// "Deletion").
	LedgerFinalizer = "modelgate.io/ledger"
	// ConditionWebhookReady (Tenant) is True when spec.webhook.url may be
	// called: it resolves to public internet addresses only.
	ConditionWebhookReady = "WebhookReady"
	// ReasonForbiddenAddress: a tenant-chosen URL points at an internal
	// address (loopback, private, link-local, metadata, ...); nothing is sent.
	ReasonForbiddenAddress = "ForbiddenAddress"
	// ReasonUnresolvable: a tenant-chosen URL's host does not resolve (yet).
	ReasonUnresolvable = "Unresolvable"
)

// DefaultGroup is the routing group of keys and backends that name none.
const DefaultGroup = "default"
