// Package ratelimit limits requests per tenant with token buckets
// (golang.org/x/time/rate) kept in memory per gateway replica: a limit of N
// requests per minute per replica, with a burst of the same size.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Limiter holds one bucket per key (a tenant's namespace).
type Limiter struct {
	// DefaultPerMinute applies to keys that have no limit of their own; 0
	// means unlimited.
	DefaultPerMinute int32
	Clock            clock.PassiveClock

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	perMinute int32
	lim       *rate.Limiter
	lastUsed  time.Time
}

// Allow takes one request from key's bucket. perMinute 0 means the default.
// When refused it says how long to wait (for Retry-After).
func (l *Limiter) Allow(key string, perMinute int32) (bool, time.Duration) {
	if perMinute <= 0 {
		perMinute = l.DefaultPerMinute
	}
	if perMinute <= 0 {
		return true, 0
	}
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[key]
	if b == nil || b.perMinute != perMinute {
		b = &bucket{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), int(perMinute))}
		l.buckets[key] = b
	}
	b.lastUsed = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Prune drops buckets unused for longer than idle (they would be full again).
func (l *Limiter) Prune(idle time.Duration) {
	cutoff := l.Clock.Now().Add(-idle)
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, b := range l.buckets {
		if b.lastUsed.Before(cutoff) {
			delete(l.buckets, k)
		}
	}
}
