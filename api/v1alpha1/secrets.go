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

// AccessTokenRotationAnnotation on a tenant's access-token Secret records the
// spec.accessTokenRotation its token was made for. The Secret, not the
// Tenant's status, is the record of the current token: a reconcile that reads
// a stale Tenant adopts the token in the Secret instead of replacing it.
const AccessTokenRotationAnnotation = "modelgate.io/access-token-rotation"
