package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types of the reconcile steps, one per step whose failure a user
// needs to tell apart. Ready summarises them (docs/controllers.md).
const (
	// ConditionRegistered (Tenant, ApiToken) is True once the object has its
	// row in the ledger (status.userID / status.tokenID).
	ConditionRegistered = "Registered"
	// ConditionGrantsApplied (Tenant) is True when every grant of the spec
	// has been added to the ledger balance.
	ConditionGrantsApplied = "GrantsApplied"
	// ConditionAccessTokenReady (Tenant) is True when the usage-API access
	// token is in its Secret and matches status.accessTokenHash.
	ConditionAccessTokenReady = "AccessTokenReady"
	// ConditionKeyProvisioned (ApiToken) is True when the key is known:
	// given as a hash, read from the referenced Secret, or generated.
	ConditionKeyProvisioned = "KeyProvisioned"
	// ConditionUsageMirrored (ApiToken) is True when the ledger's figures
	// were last mirrored into status without error.
	ConditionUsageMirrored = "UsageMirrored"
	// ConditionBackendsReady (ModelRoute) is True when every backend is
	// ready; False names the ones that are not (the route may still serve
	// from the others: see Ready).
	ConditionBackendsReady = "BackendsReady"
	// ConditionLedgerSynced is False while the ledger cannot be reached for
	// an object that is already registered in it (Ready stays as it was).
	ConditionLedgerSynced = "LedgerSynced"
)

// Reasons shared by the step conditions.
const (
	// ReasonBlocked: the step was not attempted because an earlier step it
	// needs is not done; the message names that step.
	ReasonBlocked = "Blocked"
	// ReasonSecretUnavailable: a Secret the step reads or writes could not
	// be read or written (the API server refused or failed); retried.
	ReasonSecretUnavailable = "SecretUnavailable"
	// ReasonError: a failure with no more specific reason; retried.
	ReasonError = "Error"
)

// Tenant reasons.
const (
	// ReasonDuplicateTenant: another Tenant came first in the namespace.
	ReasonDuplicateTenant = "DuplicateTenant"
)

// ApiToken reasons.
const (
	// ReasonTenantNotReady: the namespace has no ready Tenant.
	ReasonTenantNotReady = "TenantNotReady"
	// ReasonKeyInvalid: the referenced Secret holds no usable key.
	ReasonKeyInvalid = "KeyInvalid"
)

// ModelRoute reasons, of status.backends[] and of the route's conditions.
const (
	ReasonBackendReady      = "Ready"
	ReasonBackendDisabled   = "Disabled"
	ReasonUnknownProvider   = "UnknownProvider"
	ReasonInvalidBaseURL    = "InvalidBaseURL"
	ReasonCredentialMissing = "CredentialMissing"
	// ReasonInvalidAssetLibrary: options.assetLibrary names no registered
	// asset library, or one that cannot review the backend.
	ReasonInvalidAssetLibrary = "InvalidAssetLibrary"
	ReasonNoReadyBackend      = "NoReadyBackend"
	ReasonSomeBackendsFailed  = "SomeBackendsNotReady"
	ReasonDefault             = "Default"
	ReasonDefaultTaken        = "DefaultTaken"
)

// PriceRule reasons.
const (
	// ReasonPublished: the rule is in the catalog, served and billed.
	ReasonPublished = "Published"
	// ReasonInvalid: the evaluator cannot use the spec.
	ReasonInvalid = "Invalid"
)

// GenerationTask condition types, one per step of a task's life; Ready is
// True once nothing is left to do (final, settled, archived, its webhook
// delivered or given up).
const (
	// ConditionAdmitted: the controller took the task in (queued, its
	// reservation listed as a pre_consumed usage row, archived).
	ConditionAdmitted = "Admitted"
	// ConditionReviewed: private asset review passed (or does not apply).
	ConditionReviewed = "Reviewed"
	// ConditionSubmitted: an upstream accepted the task.
	ConditionSubmitted = "Submitted"
	// ConditionSettled: the charge is final (settled or refunded) and the
	// task is archived in the ledger.
	ConditionSettled = "Settled"
	// ConditionDelivered: the final-state webhook was delivered (or the
	// tenant configures none).
	ConditionDelivered = "Delivered"
)

// GenerationTask reasons.
const (
	ReasonTaskInFlight = "InFlight"
	ReasonTaskArchived = "Archived"
	// ReasonPending: the step has not started yet.
	ReasonPending = "Pending"
	// ReasonAdmitted: the reservation is held and listed.
	ReasonAdmitted = "Admitted"
	// ReasonNotRequired: the step does not apply to the task.
	ReasonNotRequired = "NotRequired"
	// ReasonReviewing, ReasonReviewPassed, ReasonReviewRejected and
	// ReasonReviewExpired follow the last review round.
	ReasonReviewing      = "Reviewing"
	ReasonReviewPassed   = "Passed"
	ReasonReviewRejected = "Rejected"
	ReasonReviewExpired  = "Expired"
	// ReasonAccepted: an upstream accepted the task.
	ReasonAccepted = "Accepted"
	// ReasonUpstreamFailed: no upstream accepted the task, or the one that
	// did failed it (the task's error says why).
	ReasonUpstreamFailed = "UpstreamFailed"
	// ReasonContentPolicy: an upstream refused the task for policy reasons.
	ReasonContentPolicy = "ContentPolicy"
	// ReasonDeleted: the task was deleted before it finished.
	ReasonDeleted = "Deleted"
	// ReasonHeld: the reservation is held until the task ends.
	ReasonHeld = "Held"
	// ReasonSettled and ReasonRefunded: the charge is final.
	ReasonSettled  = "Settled"
	ReasonRefunded = "Refunded"
	// ReasonWaiting: the step waits for the task to end.
	ReasonWaiting = "Waiting"
	// ReasonNoWebhook: the tenant configures no webhook.
	ReasonNoWebhook = "NoWebhook"
	// ReasonDelivering, ReasonDelivered and ReasonWebhookGaveUp follow
	// status.webhook.
	ReasonDelivering    = "Delivering"
	ReasonDelivered     = "Delivered"
	ReasonWebhookGaveUp = "GaveUp"
)

// Review round outcomes and asset states (status.reviewRounds).
const (
	ReviewPending  = "pending"
	ReviewPassed   = "passed"
	ReviewRejected = "rejected"
	ReviewExpired  = "expired"
)

// Task error codes (status.error.code), the contract's.
const (
	// CodeGenerationFailed is the error code of a failed task.
	CodeGenerationFailed = "generation_failed"
	// CodeContentPolicy is the code of a task an upstream refused for
	// policy reasons (the image task error table's 422 type).
	CodeContentPolicy = "content_policy_violation"
	// CodeDeleted is the code of a task deleted before it finished.
	CodeDeleted = "deleted"
)

// GetConditions, SetConditions and SetObservedGeneration let one reconcile
// skeleton write the status of every kind.

func (t *Tenant) GetConditions() []metav1.Condition      { return t.Status.Conditions }
func (t *Tenant) SetConditions(c []metav1.Condition)     { t.Status.Conditions = c }
func (t *Tenant) SetObservedGeneration(g int64)          { t.Status.ObservedGeneration = g }
func (t *ApiToken) GetConditions() []metav1.Condition    { return t.Status.Conditions }
func (t *ApiToken) SetConditions(c []metav1.Condition)   { t.Status.Conditions = c }
func (t *ApiToken) SetObservedGeneration(g int64)        { t.Status.ObservedGeneration = g }
func (r *ModelRoute) GetConditions() []metav1.Condition  { return r.Status.Conditions }
func (r *ModelRoute) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }
func (r *ModelRoute) SetObservedGeneration(g int64)      { r.Status.ObservedGeneration = g }
func (p *PriceRule) GetConditions() []metav1.Condition   { return p.Status.Conditions }
func (p *PriceRule) SetConditions(c []metav1.Condition)  { p.Status.Conditions = c }
func (p *PriceRule) SetObservedGeneration(g int64)       { p.Status.ObservedGeneration = g }
func (t *GenerationTask) GetConditions() []metav1.Condition {
	return t.Status.Conditions
}
func (t *GenerationTask) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }
func (t *GenerationTask) SetObservedGeneration(g int64)      { t.Status.ObservedGeneration = g }
