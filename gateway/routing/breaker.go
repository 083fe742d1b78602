package routing

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Breaker cools down backends that keep failing: after Threshold
// consecutive failures a backend is skipped for Cooldown (doubling on each
// failed retry, up to MaxCooldown); after the cooldown one request is let
// through (half-open) and a success closes the breaker.
type Breaker struct {
	Threshold   int
	Cooldown    time.Duration
	MaxCooldown time.Duration
	Clock       clock.PassiveClock

	mu    sync.Mutex
	state map[string]*breakerState
}

type breakerState struct {
	failures  int
	openUntil time.Time
	cooldown  time.Duration
	probing   bool
	// holdUntil is when a backend that asked for quiet (Retry-After) may
	// come first in a plan again.
	holdUntil time.Time
}

// NewBreaker returns a breaker with the gateway's defaults.
func NewBreaker(c clock.PassiveClock) *Breaker {
	return &Breaker{Threshold: 3, Cooldown: 10 * time.Second, MaxCooldown: 5 * time.Minute, Clock: c}
}

// Allow reports whether a request may go to the backend now.
func (b *Breaker) Allow(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state[key]
	if s == nil {
		return true
	}
	if !s.holdUntil.IsZero() && b.Clock.Now().Before(s.holdUntil) {
		return false
	}
	if s.failures < b.Threshold {
		return true
	}
	if b.Clock.Now().Before(s.openUntil) || s.probing {
		return false
	}
	s.probing = true // half-open: exactly one trial request
	return true
}

// Success closes the breaker of a backend.
func (b *Breaker) Success(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.state, key)
}

// Hold keeps a backend behind the others for d: it answered 429 or 503
// with a Retry-After, so requests that have another backend go there until
// then (one with no other still tries it). A success ends the hold.
func (b *Breaker) Hold(key string, d time.Duration) {
	if d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == nil {
		b.state = map[string]*breakerState{}
	}
	s := b.state[key]
	if s == nil {
		s = &breakerState{}
		b.state[key] = s
	}
	if until := b.Clock.Now().Add(d); until.After(s.holdUntil) {
		s.holdUntil = until
	}
}

// Failure counts a failure and opens the breaker at the threshold.
func (b *Breaker) Failure(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == nil {
		b.state = map[string]*breakerState{}
	}
	s := b.state[key]
	if s == nil {
		s = &breakerState{}
		b.state[key] = s
	}
	s.failures++
	if s.failures < b.Threshold {
		return
	}
	switch {
	case s.cooldown == 0:
		s.cooldown = b.Cooldown
	case s.probing:
		s.cooldown = min(2*s.cooldown, b.MaxCooldown)
	}
	s.probing = false
	s.openUntil = b.Clock.Now().Add(s.cooldown)
}
