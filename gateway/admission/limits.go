package admission

import (
	"time"

	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/ratelimit"
)

// Limits are the per-minute limits (the gateway's *ratelimit.Limiter).
type Limits interface {
	Allow(key ratelimit.Key, perMinute int32) (bool, time.Duration)
	TokensAvailable(key ratelimit.Key, perMinute int64) (bool, time.Duration)
}

// exceeded applies the tenant's and the key's request limits, and with
// tokens their token limits too; a positive wait names the limit that
// refused.
func exceeded(l Limits, p *auth.Principal, tokens bool) (time.Duration, string) {
	tenant, key := ratelimit.Tenant(p.Tenant.Namespace), ratelimit.Token(p.Token.Namespace, p.Token.Name)
	if tokens {
		if ok, wait := l.TokensAvailable(tenant, p.Tenant.Spec.TokensPerMinute); !ok {
			return wait, "the account's tokens-per-minute"
		}
		if ok, wait := l.TokensAvailable(key, p.Token.Spec.TokensPerMinute); !ok {
			return wait, "the key's tokens-per-minute"
		}
	}
	if ok, wait := l.Allow(tenant, p.Tenant.Spec.RequestsPerMinute); !ok {
		return wait, "the account's requests-per-minute"
	}
	if p.Token.Spec.RequestsPerMinute > 0 { // the platform default is per tenant, not per key
		if ok, wait := l.Allow(key, p.Token.Spec.RequestsPerMinute); !ok {
			return wait, "the key's requests-per-minute"
		}
	}
	return 0, ""
}
