package v1alpha1

import "time"

// StateAt is the contract's status of the key at now: disabled beats
// expired beats exhausted. A key is exhausted once it has spent its whole
// quota (as mirrored into status); a key created with no quota is enabled
// (every request is refused for quota), as the public gateway the contract
// mirrors reports it. The ApiToken controller stores it in status.state;
// readers that need it at another instant compute it here.
func (t *ApiToken) StateAt(now time.Time) TokenState {
	switch {
	case t.Spec.Disabled:
		return TokenDisabled
	case t.Spec.ExpiresAt != nil && !now.Before(t.Spec.ExpiresAt.Time):
		return TokenExpired
	case !t.Spec.UnlimitedQuota && t.Status.UsedQuota > 0 && t.Status.RemainQuota <= 0:
		return TokenExhausted
	default:
		return TokenEnabled
	}
}
