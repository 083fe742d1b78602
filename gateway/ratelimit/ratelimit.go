// Package ratelimit limits requests and tokens per minute.
//
// A gateway alone on its ledger (SQLite, `modelgate dev`) keeps token
// buckets (golang.org/x/time/rate) in memory: a limit of N per minute with a
// burst of the same size, exact because no other replica admits for the
// same key. Replicas sharing a PostgreSQL ledger hold the limit between them
// with minute windows (cluster.go): each leases shares of the current window
// from the ledger in chunks and admits from its share in memory.
//
// Request limits are checked before a request. Token limits cannot be known
// in advance: a request is admitted while the subject is not in debt, and
// its actual tokens are charged afterwards (possibly into debt, which then
// delays the next requests), as the public APIs' TPM limits behave.
package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Key names what a limit counts: a tenant (Name empty) or one of its API
// keys. Requests and tokens of the same subject have separate buckets. A
// struct key costs no string building on the hot path, and a caller need
// not know whether a limit applies: an unset limit returns at once.
type Key struct {
	Namespace, Name string
	tokens          bool
}

// Tenant is the key of a tenant's limits.
func Tenant(namespace string) Key { return Key{Namespace: namespace} }

// Token is the key of an API key's limits.
func Token(namespace, name string) Key { return Key{Namespace: namespace, Name: name} }

// Limiter holds one bucket per key.
type Limiter struct {
	// DefaultPerMinute applies to request limits of keys that have none of
	// their own; 0 means unlimited.
	DefaultPerMinute int32
	Clock            clock.PassiveClock
	// Windows, when set, makes the limits cluster-wide: shares of minute
	// windows leased from the ledger replace the per-replica buckets.
	Windows Windows

	mu      sync.Mutex
	buckets map[Key]*bucket
	shares  map[Key]*share
	wg      sync.WaitGroup // background leases
	leases  atomic.Int64
}

type bucket struct {
	perMinute int64
	lim       *rate.Limiter
	lastUsed  time.Time
}

// get returns key's bucket for a per-minute limit, (re)creating it when the
// limit changed. Callers hold l.mu.
func (l *Limiter) get(key Key, perMinute int64, now time.Time) *bucket {
	if l.buckets == nil {
		l.buckets = map[Key]*bucket{}
	}
	b := l.buckets[key]
	if b == nil || b.perMinute != perMinute {
		b = &bucket{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), int(perMinute))}
		l.buckets[key] = b
	}
	b.lastUsed = now
	return b
}

// Allow takes one request from key's bucket. perMinute 0 means the default.
// When refused it says how long to wait (for Retry-After).
func (l *Limiter) Allow(key Key, perMinute int32) (bool, time.Duration) {
	if perMinute <= 0 {
		perMinute = l.DefaultPerMinute
	}
	if perMinute <= 0 {
		return true, 0
	}
	if l.Windows != nil {
		return l.admit(key, int64(perMinute), true)
	}
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.get(key, int64(perMinute), now).lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// TokensAvailable reports whether key's token bucket is out of debt; 0
// means no limit. When not, it says how long until it is.
func (l *Limiter) TokensAvailable(key Key, perMinute int64) (bool, time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	key.tokens = true
	if l.Windows != nil {
		return l.admit(key, perMinute, false)
	}
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.get(key, perMinute, now).lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d == 0, d
}

// ChargeTokens takes n tokens from key's bucket after the fact, going into
// debt when the bucket holds fewer (at most one minute's worth).
func (l *Limiter) ChargeTokens(key Key, perMinute, n int64) {
	if perMinute <= 0 || n <= 0 {
		return
	}
	key.tokens = true
	if l.Windows != nil {
		l.charge(key, perMinute, n)
		return
	}
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(key, perMinute, now).lim.ReserveN(now, int(min(n, perMinute)))
}

// Prune drops buckets unused for longer than idle (they would be full
// again), and shares of windows that ended longer than idle ago.
func (l *Limiter) Prune(idle time.Duration) {
	cutoff := l.Clock.Now().Add(-idle)
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, b := range l.buckets {
		if b.lastUsed.Before(cutoff) {
			delete(l.buckets, k)
		}
	}
	for k, s := range l.shares {
		if s.window.Add(Window).Before(cutoff) && !s.leasing {
			delete(l.shares, k)
		}
	}
}
