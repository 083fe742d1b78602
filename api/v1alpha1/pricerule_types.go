package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChargeType is how a price is charged.
// +kubebuilder:validation:Enum=per_request;per_second;per_token
type ChargeType string

// Charge types.
const (
	ChargePerRequest ChargeType = "per_request"
	ChargePerSecond  ChargeType = "per_second"
	ChargePerToken   ChargeType = "per_token"
)

// PriceBasis is the quantity a price multiplies.
// +kubebuilder:validation:Enum=request;output_seconds;total_tokens;text_input_tokens
type PriceBasis string

// Price bases.
const (
	BasisRequest         PriceBasis = "request"
	BasisOutputSeconds   PriceBasis = "output_seconds"
	BasisTotalTokens     PriceBasis = "total_tokens"
	BasisTextInputTokens PriceBasis = "text_input_tokens"
)

// PriceUnit is the unit of unitPrice.
// +kubebuilder:validation:Enum=request;second;1m_tokens
type PriceUnit string

// Price units.
const (
	UnitRequest  PriceUnit = "request"
	UnitSecond   PriceUnit = "second"
	Unit1MTokens PriceUnit = "1m_tokens"
)

// PriceRuleSpec is one price of one model for one group under conditions.
// +kubebuilder:validation:XValidation:rule="self.chargeType != 'per_request' || (self.priceBasis == 'request' && self.unit == 'request')",message="per_request prices use priceBasis request and unit request"
// +kubebuilder:validation:XValidation:rule="self.chargeType != 'per_second' || (self.priceBasis == 'output_seconds' && self.unit == 'second')",message="per_second prices use priceBasis output_seconds and unit second"
// +kubebuilder:validation:XValidation:rule="self.chargeType != 'per_token' || ((self.priceBasis == 'total_tokens' || self.priceBasis == 'text_input_tokens') && self.unit == '1m_tokens')",message="per_token prices use priceBasis total_tokens or text_input_tokens and unit 1m_tokens"
// +kubebuilder:validation:XValidation:rule="!has(self.peakWindows) || size(self.peakWindows) == 0 || has(self.timezone)",message="peakWindows need a timezone"
type PriceRuleSpec struct {
	// model is the exact model ID the price is for.
	// +required
	Model ModelID `json:"model"`

	// group is the routing group the price applies to.
	// +optional
	// +kubebuilder:default=default
	Group GroupName `json:"group,omitempty"`

	// conditions restrict when the price applies; a rule without conditions
	// applies to every request of the model and group.
	// +optional
	Conditions *PriceConditions `json:"conditions,omitempty"`

	// chargeType is how the price is charged.
	// +required
	ChargeType ChargeType `json:"chargeType"`

	// priceBasis is the quantity unitPrice multiplies.
	// +required
	PriceBasis PriceBasis `json:"priceBasis"`

	// unit is the unit of unitPrice.
	// +required
	Unit PriceUnit `json:"unit"`

	// unitPrice is the USD price per unit, before the group ratio.
	// +required
	UnitPrice Decimal `json:"unitPrice"`

	// outputUnitPrice is the USD price per unit of output tokens for per_token
	// text prices; when empty output tokens cost unitPrice.
	// +optional
	OutputUnitPrice *Decimal `json:"outputUnitPrice,omitempty"`

	// cacheReadUnitPrice and cacheWriteUnitPrice price cached input tokens
	// read from and written to a prompt cache (per_token text prices).
	// +optional
	CacheReadUnitPrice *Decimal `json:"cacheReadUnitPrice,omitempty"`
	// +optional
	CacheWriteUnitPrice *Decimal `json:"cacheWriteUnitPrice,omitempty"`

	// inputUnitPrice is the USD price of input per unit, when input is priced apart.
	// +optional
	InputUnitPrice *Decimal `json:"inputUnitPrice,omitempty"`

	// inputImageUnitPrice is the USD price of each input (reference) image.
	// +optional
	InputImageUnitPrice *Decimal `json:"inputImageUnitPrice,omitempty"`

	// freeInputImageCount input images are not charged.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FreeInputImageCount *int32 `json:"freeInputImageCount,omitempty"`

	// minimumChargeUSD is the least a successful request costs.
	// +optional
	MinimumChargeUSD *Decimal `json:"minimumChargeUSD,omitempty"`

	// imageTokenPrices are USD prices per 1 million image-model tokens.
	// +optional
	ImageTokenPrices *ImageTokenPrices `json:"imageTokenPrices,omitempty"`

	// groupRatio multiplies every price of this rule for its group; the
	// published unit_price already includes it. Empty means 1.
	// +optional
	GroupRatio *Decimal `json:"groupRatio,omitempty"`

	// batchRatio multiplies the charge of a request run as a line of a
	// Batch, on top of every other price of this rule (group ratio, peak
	// window, minimum charge). Empty means 0.5, the discount OpenAI's and
	// Anthropic's batch APIs give.
	// +optional
	BatchRatio *Decimal `json:"batchRatio,omitempty"`

	// period names the pricing period shown as pricing_period, such as "peak-offpeak".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Period string `json:"period,omitempty"`

	// timezone is the IANA time zone peak windows are read in (pricing_timezone).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Timezone string `json:"timezone,omitempty"`

	// scheduleVersion identifies the peak schedule (pricing_schedule_version).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ScheduleVersion string `json:"scheduleVersion,omitempty"`

	// peakWindows are local-time windows in which another price applies.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	PeakWindows []PeakWindow `json:"peakWindows,omitempty"`
}

// PriceConditions restrict a price to some requests.
type PriceConditions struct {
	// resolution is the output resolution the price applies to, such as "1080p" or "2K".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Resolution string `json:"resolution,omitempty"`

	// hasVideoInput restricts the price to requests with (true) or without
	// (false) video input.
	// +optional
	HasVideoInput *bool `json:"hasVideoInput,omitempty"`
}

// ImageTokenPrices are USD prices per 1 million tokens of an image model.
type ImageTokenPrices struct {
	// +optional
	TextInput *Decimal `json:"textInput,omitempty"`
	// +optional
	CachedTextInput *Decimal `json:"cachedTextInput,omitempty"`
	// +optional
	ImageInput *Decimal `json:"imageInput,omitempty"`
	// +optional
	CachedImageInput *Decimal `json:"cachedImageInput,omitempty"`
	// +optional
	ImageOutput *Decimal `json:"imageOutput,omitempty"`
}

// Weekday is a day of the week.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// PeakWindow is a recurring local-time window with its own price.
// +kubebuilder:validation:XValidation:rule="has(self.multiplier) != has(self.unitPrice)",message="exactly one of multiplier or unitPrice must be set"
// +kubebuilder:validation:XValidation:rule="self.start != self.end",message="start and end must differ"
type PeakWindow struct {
	// days the window recurs on; empty means every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// start is the local start time, "HH:MM" (inclusive).
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// end is the local end time, "HH:MM" (exclusive); an end before start
	// crosses midnight.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`

	// multiplier scales unitPrice inside the window.
	// +optional
	Multiplier *Decimal `json:"multiplier,omitempty"`

	// unitPrice replaces unitPrice inside the window.
	// +optional
	UnitPrice *Decimal `json:"unitPrice,omitempty"`
}

// PriceRule condition types and reasons.
const (
	// ConditionAccepted is True when the evaluator can use the spec.
	ConditionAccepted = "Accepted"
	// ConditionPublished is True when the rule is in the catalog, served and
	// billed: it is accepted and no older rule it overlaps shadows it.
	ConditionPublished = "Published"
	// ReasonConflict: another rule already prices the same model, group and conditions.
	ReasonConflict = "Conflict"
)

// PriceRuleStatus is the observed state of a PriceRule.
type PriceRuleStatus struct {
	// conditions: Accepted (the spec can be evaluated), Published (in the
	// catalog: served and billed; not shadowed by an older overlapping rule)
	// and Ready (both).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conflictsWith names the rule this one overlaps, when not accepted.
	// +optional
	ConflictsWith string `json:"conflictsWith,omitempty"`
}

// PriceRule is a price of a model. Platform prices live in the system
// namespace; a rule in a tenant namespace is that tenant's customer price and
// replaces the platform price for the same model, group and conditions.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pr,categories=modelgate
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.group`
// +kubebuilder:printcolumn:name="Charge",type=string,JSONPath=`.spec.chargeType`
// +kubebuilder:printcolumn:name="Price",type=string,JSONPath=`.spec.unitPrice`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Published")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PriceRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec PriceRuleSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PriceRuleStatus `json:"status,omitempty"`
}

// PriceRuleList is a list of PriceRules.
// +kubebuilder:object:root=true
type PriceRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PriceRule `json:"items"`
}

func init() {
	register(&PriceRule{}, &PriceRuleList{})
}
