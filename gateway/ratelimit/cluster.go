package ratelimit

import (
	"context"
	"time"

	"github.com/modelgate/modelgate/gateway/store"
)

// Window is the length of a cluster-wide rate window: limits are per
// minute, counted in windows aligned to the minutes of the replicas' clocks.
const Window = time.Minute

// Windows leases shares of cluster-wide windows (*store.Store on
// PostgreSQL, whose rate_windows rows keep the shares of all replicas within
// the limit).
type Windows interface {
	LeaseRateWindow(ctx context.Context, subject string, start time.Time, limit, want, need int64) (store.RateGrant, error)
}

// Tuning of the shares. A share lasts this replica about lookahead at its
// current rate, so a lease is one database round trip per lookahead of
// traffic, never one per request; it is refilled in the background when less
// than half of a chunk is left. No chunk exceeds a tenth of the limit, and
// the ledger grants at most a quarter of what is left of a window beyond the
// shortfall, which bounds what an idle replica strands while others refuse.
const (
	lookahead    = 2 * time.Second
	maxChunkPart = 10
	leaseTimeout = 2 * time.Second
)

// share is this replica's part of one subject's current window.
type share struct {
	window    time.Time // start of the window the share is of
	allowance int64     // leased from the ledger (or, in fallback, assumed) for the window
	used      int64     // admitted requests or charged tokens, with a carried token debt
	prevUsed  int64     // used in the previous window: the rate before this window shows one
	exhausted bool      // the ledger has nothing left of the window for this replica
	fallback  bool      // the ledger failed in this window: the share is local
	replicas  int       // live replicas at the last lease
	leasing   bool      // a lease is in flight
	done      chan struct{}
}

func (s *share) avail() int64 { return s.allowance - s.used }

// roll moves the share to the window of now. A token debt beyond the
// window's allowance is carried into the next window (at most one limit's
// worth), as a token bucket in debt delays the next requests.
func (s *share) roll(now time.Time, limit int64, tokens bool) {
	start := now.Truncate(Window)
	if start.Equal(s.window) {
		return
	}
	carry, prev := int64(0), int64(0)
	if tokens {
		carry = min(max(s.used-s.allowance, 0), limit)
	}
	if start.Equal(s.window.Add(Window)) {
		prev = s.used
	}
	s.window, s.allowance, s.used, s.prevUsed, s.exhausted, s.fallback = start, 0, carry, prev, false, false
}

// chunkSize is the share to ask for: lookahead of this replica's rate, by
// what it used so far in the window or, early in a window, in the previous
// one; at least 1 and at most limit/maxChunkPart.
func chunkSize(limit, prevUsed, used int64, elapsed time.Duration) int64 {
	elapsed = max(elapsed, time.Second)
	rate := max(float64(used)/elapsed.Seconds(), float64(prevUsed)/Window.Seconds())
	c := int64(rate*lookahead.Seconds()) + 1
	return min(c, max(limit/maxChunkPart, 1))
}

// fallbackShare is what a replica admits in a window in which the ledger
// failed: its part of the limit by the last replica count it saw.
func fallbackShare(limit int64, replicas int) int64 {
	r := int64(max(replicas, 1))
	return (limit + r - 1) / r
}

// subject names a key's window row: kind, namespace and name (Kubernetes
// names hold no "/").
func subject(key Key) string {
	kind := "req/"
	if key.tokens {
		kind = "tok/"
	}
	return kind + key.Namespace + "/" + key.Name
}

func (l *Limiter) share(key Key) *share {
	if l.shares == nil {
		l.shares = map[Key]*share{}
	}
	s := l.shares[key]
	if s == nil {
		s = &share{replicas: 1}
		l.shares[key] = s
	}
	return s
}

// admit checks key's share of the current window: a request takes one
// (consume), a token check needs the subject out of debt. It leases more
// when the share is spent, and refuses with the time to the window's end
// when the ledger has none left.
func (l *Limiter) admit(key Key, limit int64, consume bool) (bool, time.Duration) {
	need := int64(0)
	if consume {
		need = 1
	}
	for {
		now := l.Clock.Now()
		l.mu.Lock()
		s := l.share(key)
		s.roll(now, limit, key.tokens)
		if s.avail() > 0 && s.avail() >= need {
			s.used += need
			l.maybePrefetch(key, s, limit, now)
			l.mu.Unlock()
			return true, 0
		}
		if s.exhausted || s.fallback {
			wait := s.window.Add(Window).Sub(now)
			l.mu.Unlock()
			return false, wait
		}
		if s.leasing { // wait for the lease in flight, then look again
			done := s.done
			l.mu.Unlock()
			<-done
			continue
		}
		l.startLease(s)
		l.mu.Unlock()
		l.lease(key, s, limit, now)
	}
}

// charge counts n tokens against key's share after the fact.
func (l *Limiter) charge(key Key, limit, n int64) {
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.share(key)
	s.roll(now, limit, true)
	s.used += n
	l.maybePrefetch(key, s, limit, now)
}

// maybePrefetch tops the share up in the background when less than half a
// chunk is left. Called with l.mu held.
func (l *Limiter) maybePrefetch(key Key, s *share, limit int64, now time.Time) {
	if s.leasing || s.exhausted || s.fallback {
		return
	}
	if s.avail() >= max(chunkSize(limit, s.prevUsed, s.used, now.Sub(s.window))/2, 1) {
		return
	}
	l.startLease(s)
	l.wg.Go(func() { l.lease(key, s, limit, now) })
}

// startLease marks a lease in flight. Called with l.mu held.
func (l *Limiter) startLease(s *share) {
	s.leasing, s.done = true, make(chan struct{})
}

// lease asks the ledger for a chunk of the window of now (at least the
// shortfall) and records the grant. A failure puts the share in fallback for
// the rest of the window.
func (l *Limiter) lease(key Key, s *share, limit int64, now time.Time) {
	l.mu.Lock()
	s.roll(now, limit, key.tokens)
	window := s.window
	need := max(1-s.avail(), 1)
	want := need + chunkSize(limit, s.prevUsed, s.used, now.Sub(window))
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	g, err := l.Windows.LeaseRateWindow(ctx, subject(key), window, limit, want, need)
	cancel()
	l.leases.Add(1)

	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { s.leasing = false; close(s.done) }()
	if !s.window.Equal(window) { // the window ended meanwhile; its grant is void
		return
	}
	if err != nil {
		s.fallback = true
		s.allowance = max(s.allowance, fallbackShare(limit, s.replicas))
		return
	}
	s.allowance += g.Granted
	s.replicas = g.Replicas
	if g.Granted < need {
		s.exhausted = true
	}
}

// Leases reports how many times the Limiter went to the ledger for a share
// (in steady state one per chunk, not per request).
func (l *Limiter) Leases() int64 { return l.leases.Load() }

// Wait waits for the background leases in flight.
func (l *Limiter) Wait() { l.wg.Wait() }
