package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BatchSpec is an accepted batch: a JSONL input file whose lines are run as
// ordinary requests of one endpoint. The gateway writes it once, when it
// accepts the batch; the tenant's namespace holds it.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type BatchSpec struct {
	// batchID is the public batch ID returned to the client (batch_…).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	BatchID string `json:"batchID"`

	// api is the wire the batch was submitted on: openai (the Batches API)
	// or anthropic (Message Batches). It decides the shape of the results.
	// +optional
	// +kubebuilder:default=openai
	// +kubebuilder:validation:Enum=openai;anthropic
	API string `json:"api,omitempty"`

	// endpoint is the route every line is sent to, such as
	// /v1/chat/completions.
	// +required
	// +kubebuilder:validation:Enum=/v1/chat/completions;/v1/responses;/v1/completions;/v1/embeddings;/v1/messages
	Endpoint string `json:"endpoint"`

	// inputFileID is the uploaded JSONL file (file-…) holding the lines.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	InputFileID string `json:"inputFileID"`

	// completionWindow is how long the batch may run before it expires;
	// 24h, the only window the public Batches API offers.
	// +optional
	// +kubebuilder:default="24h"
	CompletionWindow *metav1.Duration `json:"completionWindow,omitempty"`

	// concurrency bounds how many lines of this batch run at once.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Concurrency int32 `json:"concurrency,omitempty"`

	// tokenName is the ApiToken (same namespace) that submitted the batch.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TokenName string `json:"tokenName"`

	// tokenID and userID are the ledger IDs of the key and its tenant.
	// +required
	TokenID int64 `json:"tokenID"`
	// +required
	UserID int64 `json:"userID"`

	// group is the routing group the lines are served from.
	// +optional
	Group string `json:"group,omitempty"`

	// metadata is the client's metadata, returned as sent (at most 16
	// pairs, as the public API allows).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Metadata map[string]string `json:"metadata,omitempty"`

	// outputExpiresAfter is how long after their creation the output and
	// error files are kept (OpenAI's output_expires_after, 1h to 720h);
	// unset, the file store's default (30 days).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('720h')",message="outputExpiresAfter must be between 1h and 720h"
	OutputExpiresAfter *metav1.Duration `json:"outputExpiresAfter,omitempty"`
}

// BatchState is the public batch status.
// +kubebuilder:validation:Enum=validating;in_progress;finalizing;completed;failed;expired;cancelling;cancelled
type BatchState string

// Batch states, as the OpenAI Batches API names them.
const (
	BatchValidating BatchState = "validating"
	BatchInProgress BatchState = "in_progress"
	BatchFinalizing BatchState = "finalizing"
	BatchCompleted  BatchState = "completed"
	BatchFailed     BatchState = "failed"
	BatchExpired    BatchState = "expired"
	BatchCancelling BatchState = "cancelling"
	BatchCancelled  BatchState = "cancelled"
)

// Terminal reports whether no line of a batch in state s runs any more.
func (s BatchState) Terminal() bool {
	switch s {
	case BatchCompleted, BatchFailed, BatchExpired, BatchCancelled:
		return true
	}
	return false
}

// BatchExecution is where a batch's lines run.
// +kubebuilder:validation:Enum=Gateway;Upstream
type BatchExecution string

// The executions of a batch.
const (
	BatchExecutionGateway  BatchExecution = "Gateway"
	BatchExecutionUpstream BatchExecution = "Upstream"
)

// BatchUpstreamJob is one job of an Upstream batch.
type BatchUpstreamJob struct {
	// backend is the ModelRoute backend whose batch API runs the job.
	// +kubebuilder:validation:MaxLength=253
	Backend string `json:"backend"`
	// id is the upstream's job ID (empty until the upstream accepted it).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id,omitempty"`
	// lines is how many lines the job holds.
	// +kubebuilder:validation:Minimum=0
	Lines int64 `json:"lines"`
	// submittedAt is when the job was submitted.
	// +optional
	SubmittedAt *metav1.Time `json:"submittedAt,omitempty"`
}

// BatchRequestCounts counts the lines of a batch.
type BatchRequestCounts struct {
	// total is the number of lines in the input file.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Total int64 `json:"total"`
	// completed counts lines answered with a 2xx status.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Completed int64 `json:"completed"`
	// failed counts lines answered with an error.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int64 `json:"failed"`
}

// BatchCost is what the lines that ran were billed, summed.
type BatchCost struct {
	// quota is the charge in quota units.
	// +optional
	Quota int64 `json:"quota"`
	// costUSD is the charge in USD.
	// +optional
	CostUSD *Decimal `json:"costUSD,omitempty"`
}

// BatchTokens counts the tokens of a batch's billed lines, as OpenAI's batch
// object reports them.
type BatchTokens struct {
	// inputTokens counts every input token, cached ones included.
	// +optional
	InputTokens int64 `json:"inputTokens"`
	// cachedTokens counts the input tokens read from a prompt cache.
	// +optional
	CachedTokens int64 `json:"cachedTokens,omitempty"`
	// outputTokens counts the output tokens, reasoning included.
	// +optional
	OutputTokens int64 `json:"outputTokens"`
	// reasoningTokens counts the output tokens spent reasoning.
	// +optional
	ReasoningTokens int64 `json:"reasoningTokens,omitempty"`
}

// Plus is t and o together.
func (t BatchTokens) Plus(o BatchTokens) BatchTokens {
	return BatchTokens{InputTokens: t.InputTokens + o.InputTokens, CachedTokens: t.CachedTokens + o.CachedTokens,
		OutputTokens: t.OutputTokens + o.OutputTokens, ReasoningTokens: t.ReasoningTokens + o.ReasoningTokens}
}

// BatchError is why a batch failed as a whole (a line's own error goes to
// the error file).
type BatchError struct {
	// code is a machine-readable code such as invalid_input_file.
	Code string `json:"code"`
	// message is a human-readable explanation.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
	// line is the 1-based input line the error is about, if any.
	// +optional
	Line int64 `json:"line,omitempty"`
}

// BatchStatus is the observed state of a Batch.
type BatchStatus struct {
	// conditions: Ready summarises whether anything is left to do.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is the public batch status.
	// +optional
	State BatchState `json:"state,omitempty"`

	// requestCounts counts the lines: total, completed and failed.
	// +optional
	RequestCounts BatchRequestCounts `json:"requestCounts,omitempty"`

	// cost is the sum billed for the lines that ran.
	// +optional
	Cost *BatchCost `json:"cost,omitempty"`

	// usage is the tokens of the lines billed, as their usage rows count
	// them.
	// +optional
	Usage *BatchTokens `json:"usage,omitempty"`

	// model is the model the batch's first line names.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// outputFileID and errorFileID are the result files (file-…): the
	// answered lines and the failed ones.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OutputFileID string `json:"outputFileID,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ErrorFileID string `json:"errorFileID,omitempty"`

	// execution is where the lines run: Gateway, each line through the
	// gateway's own data path at spec.concurrency; or Upstream, the lines
	// submitted as jobs to the batch API of the route's upstream (OpenAI's
	// Batch API, Anthropic's Message Batches, Bedrock batch inference,
	// Vertex AI batch prediction) and polled. Set when the batch leaves
	// validating.
	// +optional
	Execution BatchExecution `json:"execution,omitempty"`

	// upstreamJobs are the upstream batch jobs of an Upstream batch, in the
	// order they were submitted (the last 16).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	UpstreamJobs []BatchUpstreamJob `json:"upstreamJobs,omitempty"`

	// errors are the batch-level errors (such as an invalid input file).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Errors []BatchError `json:"errors,omitempty"`

	// expiresAt is when the completion window ends: lines not run by then
	// are not run, and the batch becomes expired.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// The timestamps of the public batch object, each set on entering the
	// state it names.
	// +optional
	InProgressAt *metav1.Time `json:"inProgressAt,omitempty"`
	// +optional
	FinalizingAt *metav1.Time `json:"finalizingAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// +optional
	FailedAt *metav1.Time `json:"failedAt,omitempty"`
	// +optional
	ExpiredAt *metav1.Time `json:"expiredAt,omitempty"`
	// +optional
	CancellingAt *metav1.Time `json:"cancellingAt,omitempty"`
	// +optional
	CancelledAt *metav1.Time `json:"cancelledAt,omitempty"`
}

// Batch is a batch of requests run asynchronously on the tenant's behalf.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bt,categories=modelgate
// +kubebuilder:printcolumn:name="Batch",type=string,JSONPath=`.spec.batchID`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Execution",type=string,JSONPath=`.status.execution`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.requestCounts.total`
// +kubebuilder:printcolumn:name="Completed",type=integer,JSONPath=`.status.requestCounts.completed`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.requestCounts.failed`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.cost.costUSD`
// +kubebuilder:printcolumn:name="Expires",type=date,priority=1,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Batch struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the accepted batch.
	// +required
	Spec BatchSpec `json:"spec"`
	// status is the batch's progress.
	// +optional
	Status BatchStatus `json:"status,omitempty"`
}

// BatchList is a list of Batches.
// +kubebuilder:object:root=true
type BatchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Batch `json:"items"`
}

func init() {
	register(&Batch{}, &BatchList{})
}
