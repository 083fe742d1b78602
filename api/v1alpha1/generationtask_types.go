package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// GenerationTaskSpec is an accepted image or video submission. The gateway
// writes it once, after validating the request against the model's profile.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type GenerationTaskSpec struct {
	// taskID is the public task ID returned to the client.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	TaskID string `json:"taskID"`

	// model is the model ID the client asked for.
	// +required
	Model ModelID `json:"model"`

	// type is image or video.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == 'image' || self == 'video'",message="type must be image or video"
	Type ModelType `json:"type"`

	// profile is the validation profile the request was checked against.
	// +required
	Profile ValidationProfile `json:"profile"`

	// request is the validated request body, with defaults applied.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Request runtime.RawExtension `json:"request"`

	// tokenName is the ApiToken (same namespace) that submitted the task.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TokenName string `json:"tokenName"`

	// tokenID and userID are the ledger IDs of the key and its tenant.
	// +required
	TokenID int64 `json:"tokenID"`
	// +required
	UserID int64 `json:"userID"`

	// group is the routing group the task is served from.
	// +optional
	Group string `json:"group,omitempty"`

	// clientBusinessID is the caller's own identifier; the task can be queried
	// by it and a repeated submission with it replays this task.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ClientBusinessID string `json:"clientBusinessID,omitempty"`

	// privateAssetReview asks for review of private media assets before generation.
	// +optional
	PrivateAssetReview bool `json:"privateAssetReview,omitempty"`

	// reservedQuota is the quota reserved at submission (pre-deducted).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReservedQuota int64 `json:"reservedQuota,omitempty"`

	// requestID is the billing idempotency key of the reservation.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	RequestID string `json:"requestID"`

	// submission is what the gateway decided when it accepted the task and
	// the controller needs later. Absent only on tasks accepted by a release
	// that carried it in an annotation.
	// +optional
	Submission *TaskSubmission `json:"submission,omitempty"`
}

// TaskSubmission is the gateway's decision at submission time: when the
// request was accepted (the pricing instant), the route and its backends in
// plan order, and the price rule that priced the reservation (a snapshot,
// so a later price change does not change the charge of an accepted task).
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="submission is immutable"
type TaskSubmission struct {
	// acceptedAt is the pricing instant, Unix milliseconds.
	// +required
	AcceptedAt int64 `json:"acceptedAt"`
	// routeNamespace and routeName identify the ModelRoute.
	// +required
	// +kubebuilder:validation:MaxLength=63
	RouteNamespace string `json:"routeNamespace"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	RouteName string `json:"routeName"`
	// backends are the candidate backend names in the order to try.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Backends []string `json:"backends"`
	// priceNamespace, priceName and price are the price rule snapshot.
	// +required
	// +kubebuilder:validation:MaxLength=63
	PriceNamespace string `json:"priceNamespace"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	PriceName string `json:"priceName"`
	// +required
	Price PriceRuleSpec `json:"price"`
	// tokenDisplayName is the key's display name for the usage row.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TokenDisplay string `json:"tokenDisplayName,omitempty"`
	// outputs, inputImages, durationSeconds (requested; -1: the model
	// decides) and inputVideoSeconds are the billing facts of the request.
	// +required
	Outputs int64 `json:"outputs"`
	// +optional
	InputImages int64 `json:"inputImages,omitempty"`
	// +optional
	DurationSeconds int64 `json:"durationSeconds,omitempty"`
	// +optional
	InputVideoSeconds int64 `json:"inputVideoSeconds,omitempty"`
	// listVideoMillis is the part of the input video outside private asset
	// review (video_list), as the gateway counted it; the reviewed videos
	// are counted from their copies after review.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ListVideoMillis int64 `json:"listVideoMillis,omitempty"`
	// reviewAssets are the assets private asset review must pass, in
	// selection order (inline data replaced by its SHA-256 digest).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ReviewAssets []SubmittedAsset `json:"reviewAssets,omitempty"`
}

// SubmittedAsset is one asset under private asset review. url is the
// asset's URL, or "sha256:<hex>" of an inline asset's decoded content,
// which the gateway stored at blobKey.
type SubmittedAsset struct {
	// +required
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type"`
	// +required
	// +kubebuilder:validation:MaxLength=8192
	URL string `json:"url"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Role string `json:"role,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BlobKey string `json:"blobKey,omitempty"`
}

// TaskPhase is the contract's task status.
// +kubebuilder:validation:Enum=queued;submitted;in_progress;completed;failed
type TaskPhase string

// Task phases.
const (
	TaskQueued     TaskPhase = "queued"
	TaskSubmitted  TaskPhase = "submitted"
	TaskInProgress TaskPhase = "in_progress"
	TaskCompleted  TaskPhase = "completed"
	TaskFailed     TaskPhase = "failed"
)

// BillingStatus is the contract's billing status.
// +kubebuilder:validation:Enum=pending;settled;refunded
type BillingStatus string

// Billing statuses.
const (
	BillingPending  BillingStatus = "pending"
	BillingSettled  BillingStatus = "settled"
	BillingRefunded BillingStatus = "refunded"
)

// TaskBilling is the billing object of a task.
type TaskBilling struct {
	// status is pending, settled or refunded.
	// +required
	Status BillingStatus `json:"status"`
	// quota is the confirmed charge in quota units (settled or refunded only).
	// +optional
	Quota *int64 `json:"quota,omitempty"`
	// credits is the confirmed charge in credits (settled or refunded only).
	// +optional
	Credits *Decimal `json:"credits,omitempty"`
	// costUSD is the confirmed charge in USD (settled or refunded only).
	// +optional
	CostUSD *Decimal `json:"costUSD,omitempty"`
}

// TokenCountDetails splits a token count by modality.
type TokenCountDetails struct {
	// +optional
	TextTokens int64 `json:"textTokens,omitempty"`
	// +optional
	ImageTokens int64 `json:"imageTokens,omitempty"`
}

// InputTokenDetails splits input tokens, with the cached subset.
type InputTokenDetails struct {
	TokenCountDetails `json:",inline"`
	// +optional
	CachedTokens int64 `json:"cachedTokens,omitempty"`
	// +optional
	CachedTokensDetails *TokenCountDetails `json:"cachedTokensDetails,omitempty"`
}

// ImageTokenUsage is the image token usage object of a settled task.
type ImageTokenUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
	// +optional
	InputTokensDetails *InputTokenDetails `json:"inputTokensDetails,omitempty"`
	// +optional
	OutputTokensDetails *TokenCountDetails `json:"outputTokensDetails,omitempty"`
}

// TaskResult is the result of a completed task.
type TaskResult struct {
	// type is "image" or "video".
	Type string `json:"type"`
	// data lists the generated assets.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Data []TaskResultItem `json:"data"`
}

// TaskResultItem is one generated asset.
type TaskResultItem struct {
	// url is where the asset can be fetched until the task's expiresAt.
	URL string `json:"url"`
}

// TaskError is why a task failed.
type TaskError struct {
	// code is a machine-readable code such as generation_failed.
	Code string `json:"code"`
	// message is a human-readable explanation.
	Message string `json:"message"`
}

// ReviewAsset is one asset of a private asset review round.
type ReviewAsset struct {
	// url is the asset's source URL (or a digest for inline data).
	URL string `json:"url"`
	// type is image, video or audio.
	// +kubebuilder:validation:Enum=image;video;audio
	Type string `json:"type"`
	// role is the asset's role, such as first_frame or reference_video.
	// +optional
	Role string `json:"role,omitempty"`
	// state is pending, passed or rejected.
	// +kubebuilder:validation:Enum=pending;passed;rejected
	State string `json:"state"`
	// copy is the blob-store key of the reviewed copy: the upstream
	// receives a signed link to it, never the source URL.
	// +optional
	Copy string `json:"copy,omitempty"`
	// upstreamRef is the channel library's own reference of the asset
	// (Ark's asset://<id>): the upstream receives it in place of the copy.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	UpstreamRef string `json:"upstreamRef,omitempty"`
	// durationMillis is a video's or audio's duration read from the
	// copy's headers (what pricing and the 15-second totals use).
	// +optional
	DurationMillis int64 `json:"durationMillis,omitempty"`
}

// ReviewRound is one preparation round of private asset review on one backend.
type ReviewRound struct {
	// round counts from 1.
	Round int32 `json:"round"`
	// backend is the channel the round prepares for.
	Backend string `json:"backend"`
	// deadline is when the round fails if assets are not all passed.
	Deadline metav1.Time `json:"deadline"`
	// assets are the assets under review.
	// +listType=atomic
	// +optional
	Assets []ReviewAsset `json:"assets,omitempty"`
	// outcome is pending, passed, rejected or expired.
	// +kubebuilder:validation:Enum=pending;passed;rejected;expired
	Outcome string `json:"outcome"`
}

// GenerationTaskStatus is the observed state of a GenerationTask.
type GenerationTaskStatus struct {
	// conditions: Admitted, Reviewed, Submitted, Settled and Delivered,
	// one per step, summarised into Ready (nothing is left to do).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is queued, submitted, in_progress, completed or failed.
	// +optional
	Phase TaskPhase `json:"phase,omitempty"`

	// progress is 0 to 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Progress int32 `json:"progress,omitempty"`

	// backend is the channel serving the task.
	// +optional
	Backend string `json:"backend,omitempty"`

	// upstreamTaskID is the provider's task ID.
	// +optional
	UpstreamTaskID string `json:"upstreamTaskID,omitempty"`

	// attempts counts upstream submissions.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// nextPollAt is when the controller polls the upstream next.
	// +optional
	NextPollAt *metav1.Time `json:"nextPollAt,omitempty"`

	// billing is the billing object.
	// +optional
	Billing *TaskBilling `json:"billing,omitempty"`

	// usage is the image token usage, only when billing is settled and valid.
	// +optional
	Usage *ImageTokenUsage `json:"usage,omitempty"`

	// result is set when completed.
	// +optional
	Result *TaskResult `json:"result,omitempty"`

	// error is set when failed.
	// +optional
	Error *TaskError `json:"error,omitempty"`

	// startedAt, completedAt and expiresAt are the task's timestamps.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// reviewRounds records private asset review.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ReviewRounds []ReviewRound `json:"reviewRounds,omitempty"`

	// webhook is the delivery state of the final-state webhook; absent when
	// the tenant configures none.
	// +optional
	Webhook *WebhookDelivery `json:"webhook,omitempty"`
}

// WebhookState is the delivery state of a task's webhook.
// +kubebuilder:validation:Enum=pending;delivered;failed
type WebhookState string

// Webhook delivery states.
const (
	WebhookPending   WebhookState = "pending"
	WebhookDelivered WebhookState = "delivered"
	WebhookFailed    WebhookState = "failed"
)

// WebhookDelivery records the delivery of one webhook event: a task's final
// state, or a budget alert.
type WebhookDelivery struct {
	// id is the event ID (the webhook-id header), the same on every retry
	// so that receivers can drop duplicates.
	ID string `json:"id"`
	// state is pending (retrying), delivered (a 2xx answer) or failed
	// (every attempt used).
	State WebhookState `json:"state"`
	// attempts counts delivery attempts so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// lastStatusCode is the HTTP status of the last attempt (0: no answer).
	// +optional
	LastStatusCode int32 `json:"lastStatusCode,omitempty"`
	// lastError says why the last attempt failed.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	LastError string `json:"lastError,omitempty"`
	// nextAttemptAt is when the next attempt is due (pending only).
	// +optional
	NextAttemptAt *metav1.Time `json:"nextAttemptAt,omitempty"`
	// deliveredAt is when a receiver acknowledged the event.
	// +optional
	DeliveredAt *metav1.Time `json:"deliveredAt,omitempty"`
}

// GenerationTask is an asynchronous image or video generation in flight.
// The ledger keeps the archive; the object is deleted after its retention.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gt,categories=modelgate
// +kubebuilder:printcolumn:name="Task",type=string,JSONPath=`.spec.taskID`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Billing",type=string,JSONPath=`.status.billing.status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Admitted",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Reviewed",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Reviewed")].status`
// +kubebuilder:printcolumn:name="Submitted",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Submitted")].status`
// +kubebuilder:printcolumn:name="Settled",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Settled")].status`
// +kubebuilder:printcolumn:name="Delivered",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Delivered")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GenerationTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the accepted submission.
	// +required
	Spec GenerationTaskSpec `json:"spec"`
	// status is the task's progress.
	// +optional
	Status GenerationTaskStatus `json:"status,omitempty"`
}

// GenerationTaskList is a list of GenerationTasks.
// +kubebuilder:object:root=true
type GenerationTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GenerationTask `json:"items"`
}

func init() {
	register(&GenerationTask{}, &GenerationTaskList{})
}
