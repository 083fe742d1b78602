package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModelType is what a model produces.
// +kubebuilder:validation:Enum=text;image;video;audio;embedding
type ModelType string

// Model types.
const (
	ModelTypeText  ModelType = "text"
	ModelTypeImage ModelType = "image"
	ModelTypeVideo ModelType = "video"
	ModelTypeAudio ModelType = "audio"
	// ModelTypeEmbedding models turn text into vectors (POST /v1/embeddings).
	ModelTypeEmbedding ModelType = "embedding"
)

// EndpointType is a client protocol a model is served on.
// +kubebuilder:validation:Enum=messages;chat_completions;responses;image_generation;video_generation;embeddings
type EndpointType string

// Endpoint types (the contract's supported_endpoint_types values).
const (
	EndpointMessages        EndpointType = "messages"
	EndpointChatCompletions EndpointType = "chat_completions"
	EndpointResponses       EndpointType = "responses"
	EndpointImageGeneration EndpointType = "image_generation"
	EndpointVideoGeneration EndpointType = "video_generation"
	EndpointEmbeddings      EndpointType = "embeddings"
)

// ValidationProfile names the request rules of a media model family.
// +kubebuilder:validation:Enum=multi-image;single-image;image-edit;all-in-one-video
type ValidationProfile string

// Media validation profiles (the contract's model families).
const (
	// ProfileMultiImage: up to 15 images per request, references + outputs <= 15.
	ProfileMultiImage ValidationProfile = "multi-image"
	// ProfileSingleImage: exactly one image, up to 3 references, explicit pixel sizes.
	ProfileSingleImage ValidationProfile = "single-image"
	// ProfileImageEdit: text-to-image or editing with at most one reference.
	ProfileImageEdit ValidationProfile = "image-edit"
	// ProfileAllInOneVideo: the all-in-one video family.
	ProfileAllInOneVideo ValidationProfile = "all-in-one-video"
)

// ModelRouteSpec declares one model ID and the upstream backends that serve it.
// +kubebuilder:validation:XValidation:rule="!(self.type == 'image' || self.type == 'video') || has(self.validationProfile)",message="image and video models need a validationProfile"
// +kubebuilder:validation:XValidation:rule="!has(self.validationProfile) || (self.type == 'video') == (self.validationProfile == 'all-in-one-video')",message="validationProfile does not fit the model type"
// +kubebuilder:validation:XValidation:rule="!has(self.defaultModel) || !self.defaultModel || self.type in ['image', 'video']",message="defaultModel applies to image and video routes: text requests always name their model"
type ModelRouteSpec struct {
	// model is the model ID clients send.
	// +required
	Model ModelID `json:"model"`

	// type is what the model produces.
	// +optional
	// +kubebuilder:default=text
	Type ModelType `json:"type,omitempty"`

	// endpointTypes are the client protocols the model is offered on. Text
	// models default to every text protocol (translation makes any of them reach
	// any text upstream).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	EndpointTypes []EndpointType `json:"endpointTypes,omitempty"`

	// ownedBy is shown as owned_by in the model list.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OwnedBy string `json:"ownedBy,omitempty"`

	// displayName is shown as display_name in the model list (Anthropic's
	// clients show it); default: the model ID.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DisplayName string `json:"displayName,omitempty"`

	// validationProfile selects the request rules of image and video families.
	// +optional
	ValidationProfile ValidationProfile `json:"validationProfile,omitempty"`

	// maxOutputTokens caps max_tokens for text requests; 0 means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	MaxOutputTokens int32 `json:"maxOutputTokens,omitempty"`

	// privateAssetReview enables the private asset review switch for video
	// requests with media inputs.
	// +optional
	PrivateAssetReview bool `json:"privateAssetReview,omitempty"`

	// defaultModel makes this route's model the one used by image or video
	// requests that name no model. A tenant's own default wins over the
	// platform's. Of several defaults of one type in one namespace the oldest
	// is used (then the first by name); the others report Default=False.
	// +optional
	DefaultModel bool `json:"defaultModel,omitempty"`

	// backends are the upstream channels that serve the model.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Backends []Backend `json:"backends"`
}

// Backend is one upstream channel of a model.
// +kubebuilder:validation:XValidation:rule="self.provider.startsWith('simulated') || has(self.baseURL)",message="baseURL is required for every provider but the built-in simulated ones"
type Backend struct {
	// name identifies the backend inside the route.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// provider is the adapter that speaks the upstream's API, such as
	// "anthropic", "openai" or "simulated".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*$`
	Provider string `json:"provider"`

	// baseURL is the upstream's base URL (http or https).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="baseURL must be an http or https URL"
	BaseURL string `json:"baseURL,omitempty"`

	// credentialSecretRef names the Secret key holding the upstream credential.
	// +optional
	CredentialSecretRef *SecretKeyRef `json:"credentialSecretRef,omitempty"`

	// upstreamModel is the model name sent upstream; empty means spec.model.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UpstreamModel string `json:"upstreamModel,omitempty"`

	// groups are the routing groups this backend serves.
	// +optional
	// +listType=set
	// +kubebuilder:default={"default"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Groups []GroupName `json:"groups,omitempty"`

	// priority orders backends: the lowest tier that has a healthy backend is used.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// weight is the share of traffic inside a priority tier; 0 takes traffic
	// only when every other backend of the tier is unavailable.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight,omitempty"`

	// disabled takes the backend out of rotation.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// timeoutSeconds bounds one upstream attempt; 0 means the gateway default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// options are provider-specific settings (for the simulated provider:
	// chunkDelay, failRate, …). Never put credentials here.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Options map[string]string `json:"options,omitempty"`
}

// BackendStatus is the observed state of one backend.
type BackendStatus struct {
	// name is the backend's name.
	Name string `json:"name"`
	// ready is true when the backend may receive traffic.
	Ready bool `json:"ready"`
	// reason is a CamelCase reason when not ready.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message says what to fix when not ready.
	// +optional
	Message string `json:"message,omitempty"`
}

// ModelRouteStatus is the observed state of a ModelRoute.
type ModelRouteStatus struct {
	// conditions: Ready (at least one backend is ready), BackendsReady
	// (every backend is) and Default (on defaultModel routes).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// backends is the readiness of each backend.
	// +optional
	// +listType=map
	// +listMapKey=name
	Backends []BackendStatus `json:"backends,omitempty"`

	// readyBackends counts the ready backends.
	// +optional
	ReadyBackends int32 `json:"readyBackends,omitempty"`
}

// ModelRoute declares a model and the upstream backends that serve it. In the
// system namespace it applies to every tenant; in a tenant namespace it
// applies to that tenant only and wins over the platform route.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mr,categories=modelgate
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Backends",type=integer,JSONPath=`.status.readyBackends`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="All Backends",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="BackendsReady")].status`
// +kubebuilder:printcolumn:name="Default",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Default")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ModelRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec ModelRouteSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status ModelRouteStatus `json:"status,omitempty"`
}

// ModelRouteList is a list of ModelRoutes.
// +kubebuilder:object:root=true
type ModelRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelRoute `json:"items"`
}

func init() {
	register(&ModelRoute{}, &ModelRouteList{})
}

// ConditionDefault is True on a defaultModel route that is the default of
// its type in its namespace, False (reason DefaultTaken) on one that another
// route precedes. Routes without defaultModel do not have it.
const ConditionDefault = "Default"
