package v1alpha1

// Data keys of the Secrets the controllers write.
const (
	// AccessTokenSecretKey is the data key of a tenant's access-token Secret
	// (<tenant>-access-token).
	AccessTokenSecretKey = "token"
	// APIKeySecretKey is the data key of the Secret a generated API key is
	// written to (<token>-key).
	APIKeySecretKey = "key"
)
