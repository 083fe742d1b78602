package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApiTokenSpec is the desired state of an API key (the contract's "API token").
// +kubebuilder:validation:XValidation:rule="!(has(self.quota) && has(self.credits))",message="set at most one of quota or credits"
// +kubebuilder:validation:XValidation:rule="!(has(self.keySecretRef) && has(self.keyHash))",message="set at most one of keySecretRef or keyHash"
// +kubebuilder:validation:XValidation:rule="has(self.keyHash) == has(self.keyPrefix)",message="keyHash and keyPrefix go together"
// +kubebuilder:validation:XValidation:rule="!has(self.modelLimits) || size(self.modelLimits) == 0 || self.modelLimitsEnabled",message="modelLimits requires modelLimitsEnabled: true"
// +kubebuilder:validation:XValidation:rule="!has(self.alerts) || self.alerts.all(a, !has(a.dailyLimitPercent) || (has(self.dailyQuota) && self.dailyQuota > 0))",message="a dailyLimitPercent alert needs a dailyQuota"
// +kubebuilder:validation:XValidation:rule="!has(self.alerts) || self.alerts.all(a, !has(a.monthlyLimitPercent) || (has(self.monthlyQuota) && self.monthlyQuota > 0))",message="a monthlyLimitPercent alert needs a monthlyQuota"
type ApiTokenSpec struct {
	// displayName is the key's name as the contract shows it (`name`).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="size(self) <= 50",message="token name must be at most 50 characters"
	DisplayName string `json:"displayName"`

	// keySecretRef points at an existing Secret key that holds the key
	// (`sk-` + 48 characters). When neither keySecretRef nor keyHash is set the
	// controller generates a key and writes it once into a Secret owned by
	// this ApiToken.
	// +optional
	KeySecretRef *SecretKeyRef `json:"keySecretRef,omitempty"`

	// keyHash is the SHA-256 (lower-case hex) of a key generated outside the
	// cluster and shown to its owner once, such as by POST /v1/tokens. The key
	// itself is stored nowhere.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	KeyHash string `json:"keyHash,omitempty"`

	// keyPrefix is the non-secret display prefix of the key of keyHash ("sk-abcd").
	// +optional
	// +kubebuilder:validation:MaxLength=16
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// disabled turns the key off (status 2) without deleting it.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// expiresAt is when the key stops working (status 3); empty means never
	// (the contract's expired_time -1).
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// quota is the key's initial budget in internal quota units
	// (500000 = 1 USD). It is applied when the key is registered; later use is
	// tracked in the ledger and mirrored into status.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Quota *int64 `json:"quota,omitempty"`

	// credits is the initial budget in credits (200 = 1 USD), an alternative to quota.
	// +optional
	Credits *Decimal `json:"credits,omitempty"`

	// unlimitedQuota lifts the key's own quota restriction (the tenant's still applies).
	// +optional
	UnlimitedQuota bool `json:"unlimitedQuota,omitempty"`

	// dailyQuota limits the quota used per UTC day; 0 means no daily limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DailyQuota int64 `json:"dailyQuota,omitempty"`

	// monthlyQuota limits the quota used per UTC calendar month; 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MonthlyQuota int64 `json:"monthlyQuota,omitempty"`

	// modelLimitsEnabled turns the model allow-list on.
	// +optional
	ModelLimitsEnabled bool `json:"modelLimitsEnabled,omitempty"`

	// modelLimits is the allow-list of model IDs, effective only when
	// modelLimitsEnabled is true.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	ModelLimits []ModelID `json:"modelLimits,omitempty"`

	// group is the routing group of the key; empty means the tenant's group,
	// "auto" lets the gateway pick any group the tenant may use.
	// +optional
	Group string `json:"group,omitempty"`

	// requestsPerMinute caps the key's requests per minute, across all gateway
	// replicas on one PostgreSQL ledger; 0 means no limit of its own (the
	// tenant's still applies).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	RequestsPerMinute int32 `json:"requestsPerMinute,omitempty"`

	// tokensPerMinute caps the key's tokens (input + output) per minute,
	// across all gateway replicas on one PostgreSQL ledger; 0 means no limit
	// of its own.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`

	// crossGroupRetry lets a request fall back to the tenant's other groups
	// when every backend of the key's group failed.
	// +optional
	CrossGroupRetry bool `json:"crossGroupRetry,omitempty"`

	// alerts warn before the key's balance or a limit runs out. Each
	// threshold fires once when the figure crosses it (a Warning Event on
	// the ApiToken, a balance.low or limit.reached webhook to the tenant's
	// webhook, a metric) and again only after the figure went back to the
	// safe side, such as in a new day or month. Thresholds are measured
	// when the controller mirrors the ledger, so an alert comes at most one
	// status sync period after the crossing. Balance thresholds are not
	// measured while unlimitedQuota is set.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b == a))",message="alerts must not repeat a threshold"
	Alerts []ApiTokenAlert `json:"alerts,omitempty"`
}

// TokenState is the contract's token status.
// +kubebuilder:validation:Enum=1;2;3;4
type TokenState int32

// Token states as the contract numbers them.
const (
	TokenEnabled   TokenState = 1
	TokenDisabled  TokenState = 2
	TokenExpired   TokenState = 3
	TokenExhausted TokenState = 4
)

// ApiTokenStatus is the observed state of an ApiToken.
type ApiTokenStatus struct {
	// conditions: Ready (the key is provisioned and registered),
	// KeyProvisioned, Registered, UsageMirrored and LedgerSynced (after a
	// ledger outage).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// tokenID is the integer key ID from the ledger (the contract's id).
	// +optional
	TokenID int64 `json:"tokenID,omitempty"`

	// userID is the integer ID of the owning tenant.
	// +optional
	UserID int64 `json:"userID,omitempty"`

	// keyHash is the SHA-256 (hex) of the key; the gateway authenticates by it.
	// The key itself is never stored outside its Secret.
	// +optional
	KeyHash string `json:"keyHash,omitempty"`

	// keyPrefix is a short, non-secret prefix of the key for display ("sk-abcd").
	// +optional
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// secretName is the Secret holding the key.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// state is 1 enabled, 2 disabled, 3 expired or 4 quota exhausted.
	// +optional
	State TokenState `json:"state,omitempty"`

	// remainQuota and usedQuota mirror the ledger at a bounded rate.
	// +optional
	RemainQuota int64 `json:"remainQuota,omitempty"`
	// +optional
	UsedQuota int64 `json:"usedQuota,omitempty"`

	// accessedAt is the last time the key was used, mirrored at a bounded rate.
	// +optional
	AccessedAt *metav1.Time `json:"accessedAt,omitempty"`

	// usageSyncedAt is when the mirrored fields were last written; they are
	// written when a figure changed, at most once per sync period.
	// +optional
	UsageSyncedAt *metav1.Time `json:"usageSyncedAt,omitempty"`

	// alerts says where each threshold of spec.alerts stands once it has
	// fired: the fired state lives here, so a restarted manager neither
	// fires a crossing again nor loses one.
	// +optional
	// +listType=map
	// +listMapKey=threshold
	// +kubebuilder:validation:MaxItems=8
	Alerts []AlertStatus `json:"alerts,omitempty"`
}

// ApiToken is an API key of a tenant: a bearer credential with limits.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tok,categories=modelgate
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="ID",type=integer,JSONPath=`.status.tokenID`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.keyPrefix`
// +kubebuilder:printcolumn:name="State",type=integer,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Key Provisioned",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="KeyProvisioned")].status`
// +kubebuilder:printcolumn:name="Registered",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Registered")].status`
// +kubebuilder:printcolumn:name="Usage",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="UsageMirrored")].status`
// +kubebuilder:printcolumn:name="Managed By",type=string,JSONPath=`.metadata.labels.modelgate\.io/managed-by`,description="modelgate.io/managed-by: console for keys made in the console, gitops for keys a pipeline owns"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApiToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec ApiTokenSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status ApiTokenStatus `json:"status,omitempty"`
}

// ApiTokenList is a list of ApiTokens.
// +kubebuilder:object:root=true
type ApiTokenList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApiToken `json:"items"`
}

func init() {
	register(&ApiToken{}, &ApiTokenList{})
}
