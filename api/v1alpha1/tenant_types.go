package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantSpec is the desired state of a Tenant: one customer account, living
// alone in its own namespace.
type TenantSpec struct {
	// displayName is a human-readable name for the account.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DisplayName string `json:"displayName,omitempty"`

	// group is the routing group of the tenant's keys that name none.
	// +optional
	// +kubebuilder:default=default
	Group GroupName `json:"group,omitempty"`

	// allowedGroups are the routing groups the tenant's keys may select, in
	// addition to group. A key with automatic group selection may use any of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	AllowedGroups []GroupName `json:"allowedGroups,omitempty"`

	// unlimitedQuota lifts the account-wide quota restriction.
	// +optional
	UnlimitedQuota bool `json:"unlimitedQuota,omitempty"`

	// creditLimit is the account's credit line in credits (200 credits =
	// 1 USD): the balance may go down to minus this amount, and requests are
	// reserved against the balance plus the credit line. 0 (the default)
	// allows no debt.
	// +optional
	CreditLimit *Decimal `json:"creditLimit,omitempty"`

	// grants add quota to the account balance. Each grant is applied exactly
	// once, keyed by its id; removing a grant from the list does not take the
	// quota back (grants are a ledger, not a desired balance).
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=256
	Grants []Grant `json:"grants,omitempty"`

	// accessTokenRotation is a counter for the account's system access token
	// (the credential of /api/usage/tokens/*). Raising it generates a new token
	// and invalidates the previous one at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AccessTokenRotation int64 `json:"accessTokenRotation,omitempty"`

	// requestsPerMinute caps requests of all the tenant's keys together per
	// minute, across all gateway replicas on one PostgreSQL ledger; 0 means
	// the platform default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	RequestsPerMinute int32 `json:"requestsPerMinute,omitempty"`

	// tokensPerMinute caps the tokens (input + output) of all the tenant's
	// keys together per minute, across all gateway replicas on one PostgreSQL
	// ledger; 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`

	// webhook receives the final state (completed or failed, with its
	// billing) of each of the tenant's image and video tasks, and the
	// budget alerts of the tenant and its keys (balance.low, limit.reached).
	// +optional
	Webhook *WebhookSpec `json:"webhook,omitempty"`

	// alerts warn before the balance runs out. Each threshold fires once
	// when the balance crosses it (a Warning Event on the Tenant, a
	// balance.low webhook, a metric) and again only after the balance went
	// back above it, such as after a grant. Thresholds are measured when
	// the controller mirrors the ledger, so an alert comes at most one
	// status sync period after the crossing. Not measured while
	// unlimitedQuota is set.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b == a))",message="alerts must not repeat a threshold"
	Alerts []TenantAlert `json:"alerts,omitempty"`

	// console configures who may sign in to the tenant console for this
	// tenant besides the holders of its access token.
	// +optional
	Console *TenantConsole `json:"console,omitempty"`
}

// TenantConsole configures the tenant console for one tenant.
type TenantConsole struct {
	// oidc maps the groups of the platform's OpenID Connect provider to the
	// tenant's console roles.
	// +optional
	OIDC *TenantConsoleOIDC `json:"oidc,omitempty"`
}

// OIDCGroup is one value of the identity provider's groups claim.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
type OIDCGroup string

// TenantConsoleOIDC are the identity provider's groups whose members sign in
// to this tenant's console, and with which role. A member of both lists is
// a key manager.
type TenantConsoleOIDC struct {
	// viewerGroups are groups whose members see the tenant's pages but may
	// not create, change or delete keys.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	ViewerGroups []OIDCGroup `json:"viewerGroups,omitempty"`

	// keyManagerGroups are groups whose members see the tenant's pages and
	// manage its keys.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	KeyManagerGroups []OIDCGroup `json:"keyManagerGroups,omitempty"`
}

// WebhookSpec is where and how webhooks (task events and budget alerts) are
// delivered. Deliveries are
// signed in the Standard Webhooks style (webhook-id, webhook-timestamp and
// webhook-signature headers; HMAC-SHA256 over "id.timestamp.body").
type WebhookSpec struct {
	// url receives the deliveries as HTTP POSTs (http or https).
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="url must be an http or https URL"
	URL string `json:"url"`

	// secretRef names the key of a Secret in the tenant's namespace that
	// holds the signing secret: "whsec_" followed by base64 (the Standard
	// Webhooks form), or any other string of at least 16 bytes used as is.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`

	// maxAttempts bounds deliveries of one event (the first try included);
	// retries back off from 5 seconds to 30 minutes.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=12
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
}

// Grant adds quota to a tenant, once.
// +kubebuilder:validation:XValidation:rule="has(self.credits) != has(self.quota)",message="exactly one of credits or quota must be set"
type Grant struct {
	// id identifies the grant; a grant id is applied at most once per tenant.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`

	// credits is the amount in credits (200 credits = 1 USD).
	// +optional
	Credits *Decimal `json:"credits,omitempty"`

	// quota is the amount in internal quota units (500000 = 1 USD).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Quota *int64 `json:"quota,omitempty"`

	// reason is a free-text note kept with the grant.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// TenantStatus is the observed state of a Tenant.
type TenantStatus struct {
	// conditions: Ready (registered and the access token kept), Registered,
	// GrantsApplied, AccessTokenReady, WebhookReady (when spec.webhook is
	// set) and LedgerSynced (after a ledger outage).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// userID is the integer account ID from the ledger (the contract's user_id
	// and the X-User-Id header of the usage API).
	// +optional
	UserID int64 `json:"userID,omitempty"`

	// appliedGrants lists the ids of grants applied to the ledger.
	// +optional
	// +listType=set
	AppliedGrants []string `json:"appliedGrants,omitempty"`

	// accessTokenSecretName is the Secret holding the current access token.
	// +optional
	AccessTokenSecretName string `json:"accessTokenSecretName,omitempty"`

	// accessTokenHash is the SHA-256 (hex) of the current access token.
	// +optional
	AccessTokenHash string `json:"accessTokenHash,omitempty"`

	// accessTokenRotation is the spec.accessTokenRotation the token was made for.
	// +optional
	AccessTokenRotation int64 `json:"accessTokenRotation,omitempty"`

	// remainQuota and usedQuota mirror the ledger at a bounded rate.
	// +optional
	RemainQuota int64 `json:"remainQuota,omitempty"`
	// +optional
	UsedQuota int64 `json:"usedQuota,omitempty"`

	// creditLimitQuota is the credit line in force in the ledger, in quota
	// units: remainQuota may go down to minus this.
	// +optional
	CreditLimitQuota int64 `json:"creditLimitQuota,omitempty"`

	// balanceSyncedAt is when remainQuota and usedQuota were last mirrored.
	// +optional
	BalanceSyncedAt *metav1.Time `json:"balanceSyncedAt,omitempty"`

	// alerts says where each threshold of spec.alerts stands once it has
	// fired: the fired state lives here, so a restarted manager neither
	// fires a crossing again nor loses one.
	// +optional
	// +listType=map
	// +listMapKey=threshold
	// +kubebuilder:validation:MaxItems=8
	Alerts []AlertStatus `json:"alerts,omitempty"`
}

// Tenant is one customer account. Exactly one Tenant lives in a tenant
// namespace; ApiTokens and GenerationTasks of that namespace belong to it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tn,categories=modelgate
// +kubebuilder:printcolumn:name="User ID",type=integer,JSONPath=`.status.userID`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.group`
// +kubebuilder:printcolumn:name="Remain",type=integer,JSONPath=`.status.remainQuota`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Registered",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Registered")].status`
// +kubebuilder:printcolumn:name="Grants",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="GrantsApplied")].status`
// +kubebuilder:printcolumn:name="Access Token",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="AccessTokenReady")].status`
// +kubebuilder:printcolumn:name="Webhook",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="WebhookReady")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec TenantSpec `json:"spec,omitempty"`
	// status is the observed state.
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	register(&Tenant{}, &TenantList{})
}
