// Package v1alpha1 holds the modelgate.io/v1alpha1 API: Tenant, ApiToken,
// ModelRoute, PriceRule and GenerationTask.
//
// +kubebuilder:object:generate=true
// +groupName=modelgate.io
package v1alpha1
