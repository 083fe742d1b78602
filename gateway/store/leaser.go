package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
)

// LeaseConfig configures a Leaser.
type LeaseConfig struct {
	// ReplicaID names the gateway replica (pod name); one lease row per
	// replica and token.
	ReplicaID string
	// Chunk is the most quota taken into a lease at once beyond what the
	// request needs. Default 500000 (1 USD).
	Chunk billing.Quota
	// DirectBelow: while the balance a lease would draw on is below this, no
	// lease is taken and requests reserve directly in the ledger. Quota in
	// one replica's lease cannot serve another replica's request, so near the
	// end of a balance leases would refuse requests the balance could still
	// pay; direct reservations there keep every unit of quota usable. The
	// gateway sets it to two chunks; 0 disables it.
	DirectBelow billing.Quota
	// TTL is how long a lease lives without renewal; a dead replica's quota
	// returns to the balance one TTL (plus a sweep interval) after its last
	// renewal. Default 1 minute.
	TTL time.Duration
}

// Leaser reserves quota for one gateway replica from leases it takes from the
// ledger in chunks, so that the hot path does no database I/O in steady
// state. See docs/billing.md for the design and its invariant.
type Leaser struct {
	store *Store
	cfg   LeaseConfig

	mu     sync.Mutex
	leases map[int64]*localLease // by token ID
	closed bool

	prefetches sync.WaitGroup // background refills; Close waits for them
	takes      atomic.Int64
}

// localLease is the replica's view of its lease on one token.
type localLease struct {
	// fill serialises takes from the ledger for this token and is held across
	// the database round trip; mu is never held across I/O, so reservations
	// covered by the lease and settles never wait for a refill.
	fill sync.Mutex

	mu          sync.Mutex
	id          int64         // lease row; 0 when none or unbounded
	available   billing.Quota // leased and not reserved locally
	unbounded   bool
	expiresAt   time.Time
	prefetching bool
}

// Hold is one request's reservation, against a lease or (for an estimate
// larger than a chunk) a direct reservation in the ledger. Settle or Release
// it exactly once; a second call is ignored.
type Hold struct {
	lease     *localLease
	leaseID   int64
	amount    billing.Quota
	direct    bool // a Store reservation under requestID, not a lease hold
	requestID string
	finished  atomic.Bool
}

// Amount is the quota the hold reserved (for ReserveUpTo, what fit chose).
func (h *Hold) Amount() billing.Quota { return h.amount }

// Direct reports whether the hold is a direct ledger reservation; its
// Settle and Release do I/O.
func (h *Hold) Direct() bool { return h.direct }

// Charge tells the ledger how to account a usage row when it is written; the
// usage writer carries it. The zero value means the quota was already
// charged by Store.Settle (the direct reservation path).
type Charge struct {
	// Apply charges the row's quota when the row is inserted (once: the
	// request ID is unique).
	Apply bool `json:"apply,omitempty"`
	// LeaseID is the lease the quota was reserved from; the row's quota is
	// taken from it. 0, or a lease that is gone (returned or swept), means
	// the quota is taken from the balances directly.
	LeaseID int64 `json:"lease_id,omitempty"`
}

// ErrLeaserClosed is returned by Reserve after Close.
var ErrLeaserClosed = errors.New("leaser closed")

// NewLeaser returns a Leaser for one replica.
func (s *Store) NewLeaser(cfg LeaseConfig) *Leaser {
	if cfg.Chunk <= 0 {
		cfg.Chunk = billing.QuotaPerUSD
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Minute
	}
	return &Leaser{store: s, cfg: cfg, leases: map[int64]*localLease{}}
}

// Reserve holds estimate for request requestID of tokenID. It is served
// from the replica's lease when the lease covers the estimate (no I/O);
// otherwise the Leaser takes another chunk from the ledger, which fails with
// ErrInsufficientQuota when the balances cannot cover the estimate. An
// estimate larger than a chunk (a long video task, a huge prompt) falls back
// to a direct, durable reservation with Store.Reserve: leasing it would
// strand a large amount in one replica, and a task that runs for minutes
// should not depend on a lease's TTL.
func (l *Leaser) Reserve(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota) (*Hold, error) {
	return l.ReserveUpTo(ctx, requestID, tokenID, userID, estimate, nil)
}

// ReserveUpTo is Reserve for a request that can be made smaller (a text
// request's output cap): when neither the lease nor a take from the ledger
// covers estimate, the replica returns its lease and reserves directly with
// Store.ReserveUpTo, which lets fit choose a smaller amount under the
// ledger's row locks. Fitting against the ledger rather than the lease keeps
// it exact across replicas: what the balances allow is known only there.
// Hold.Amount is what was reserved.
func (l *Leaser) ReserveUpTo(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit Fit) (*Hold, error) {
	if estimate < 0 {
		return nil, fmt.Errorf("lease reserve: negative estimate %d", estimate)
	}
	if estimate > l.cfg.Chunk {
		return l.direct(ctx, requestID, tokenID, userID, estimate, fit)
	}
	ll, err := l.local(tokenID)
	if err != nil {
		return nil, err
	}
	if h := l.fromLease(ll, tokenID, userID, estimate); h != nil {
		return h, nil
	}
	// Refill with what the lease lacks; if concurrent reservations used the
	// refill up meanwhile, refill once more with the whole estimate, which
	// refill then holds for this request alone.
	h, err := l.refill(ctx, ll, tokenID, userID, estimate, false)
	if h == nil && err == nil {
		h, err = l.refill(ctx, ll, tokenID, userID, estimate, true)
	}
	if errors.Is(err, errLowBalance) || (fit != nil && errors.Is(err, ErrInsufficientQuota)) {
		// Near the end of the balance: give this replica's lease back so its
		// quota serves every replica, and reserve directly.
		l.returnLease(ctx, ll)
		return l.direct(ctx, requestID, tokenID, userID, estimate, fit)
	}
	return h, err
}

// direct makes a durable reservation in the ledger for one request.
func (l *Leaser) direct(ctx context.Context, requestID string, tokenID, userID int64, estimate billing.Quota, fit Fit) (*Hold, error) {
	if requestID == "" {
		return nil, errors.New("lease reserve: a direct reservation needs a request ID")
	}
	amount, err := l.store.ReserveUpTo(ctx, requestID, tokenID, userID, estimate, fit)
	if err != nil {
		return nil, err
	}
	return &Hold{direct: true, requestID: requestID, amount: amount}, nil
}

// returnLease gives what the local lease has not held back to the ledger.
// The lease row keeps the quota of holds already made from it, so their
// usage rows still charge it: returning the whole row would hand that quota
// to the next direct reservation while those rows, arriving later, charged
// the balances once more.
func (l *Leaser) returnLease(ctx context.Context, ll *localLease) {
	ll.fill.Lock()
	defer ll.fill.Unlock()
	ll.mu.Lock()
	id, unheld := ll.id, ll.available
	ll.available = 0
	ll.mu.Unlock()
	if id != 0 && unheld > 0 {
		if err := l.store.shrinkLease(ctx, id, int64(unheld)); err != nil {
			// Kept in the lease: the sweep returns it at expiry.
			return
		}
	}
}

// fromLease holds estimate from the local lease if it is valid and covers
// it, and starts a background refill when the lease runs low or nears
// expiry. It returns nil when the caller must refill.
func (l *Leaser) fromLease(ll *localLease, tokenID, userID int64, estimate billing.Quota) *Hold {
	now := l.store.clock.Now()
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if !ll.covers(now, l.renewAt(), estimate) {
		return nil
	}
	h := ll.hold(estimate)
	if !ll.prefetching && (ll.low(l.cfg.Chunk) || !ll.valid(now, 2*l.renewAt())) {
		l.prefetch(ll, tokenID, userID)
	}
	return h
}

// renewAt is how long before expiry a lease is renewed on use; it leaves
// room for clock skew between this replica and the sweeper.
func (l *Leaser) renewAt() time.Duration { return l.cfg.TTL / 3 }

func (ll *localLease) valid(now time.Time, margin time.Duration) bool {
	return now.Before(ll.expiresAt.Add(-margin))
}

func (ll *localLease) covers(now time.Time, margin time.Duration, estimate billing.Quota) bool {
	return ll.valid(now, margin) && (ll.unbounded || ll.available >= estimate)
}

// low reports whether less than a quarter chunk is left: time to prefetch.
func (ll *localLease) low(chunk billing.Quota) bool { return !ll.unbounded && ll.available < chunk/4 }

func (ll *localLease) hold(estimate billing.Quota) *Hold {
	if !ll.unbounded {
		ll.available -= estimate
	}
	return &Hold{lease: ll, leaseID: ll.id, amount: estimate}
}

// refill takes quota from the ledger into the lease and renews its expiry,
// then holds estimate from it. It returns (nil, nil) when other requests used
// the refill up before this one could hold from it; with whole set it takes
// the full estimate, so that cannot happen.
func (l *Leaser) refill(ctx context.Context, ll *localLease, tokenID, userID int64, estimate billing.Quota, whole bool) (*Hold, error) {
	ll.fill.Lock()
	defer ll.fill.Unlock()
	now := l.store.clock.Now()
	ll.mu.Lock()
	if ll.covers(now, l.renewAt(), estimate) { // another refill got here first
		h := ll.hold(estimate)
		ll.mu.Unlock()
		return h, nil
	}
	usable := ll.usable(now)
	want := estimate
	if !whole {
		want = max(estimate-usable, 0)
	}
	ll.mu.Unlock()

	g, err := l.store.takeLease(ctx, l.cfg.ReplicaID, tokenID, userID, int64(want), int64(usable), int64(l.cfg.Chunk), int64(l.cfg.DirectBelow), l.cfg.TTL)
	if err != nil {
		return nil, err
	}
	l.takes.Add(1)
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.apply(g)
	if whole {
		// The take included the estimate: hold it even if concurrent holds
		// drew the local balance down meanwhile (it stays >= 0).
		ll.available -= min(estimate, billing.Quota(g.granted))
		return &Hold{lease: ll, leaseID: ll.id, amount: estimate}, nil
	}
	if !ll.unbounded && ll.available < estimate {
		return nil, nil
	}
	return ll.hold(estimate), nil
}

// usable is the local balance a take can build on: none once the lease has
// expired, since the sweeper may have returned it.
func (ll *localLease) usable(now time.Time) billing.Quota {
	if !now.Before(ll.expiresAt) {
		return 0
	}
	return ll.available
}

// apply records a take. A new or replacing lease row starts from its grant:
// the old row was returned to the ledger in full, holds included.
func (ll *localLease) apply(g leaseGrant) {
	if g.replaced || g.id != ll.id {
		ll.available = 0
	}
	ll.id, ll.unbounded, ll.expiresAt = g.id, g.unbounded, g.expiresAt
	ll.available += billing.Quota(g.granted)
}

// prefetch tops the lease up and renews it in the background so that
// requests rarely wait for a take. Called with ll.mu held.
func (l *Leaser) prefetch(ll *localLease, tokenID, userID int64) {
	// Add under l.mu, where Close sets closed before it Waits.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	ll.prefetching = true
	l.prefetches.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.prefetches.Done()
		defer func() {
			ll.mu.Lock()
			ll.prefetching = false
			ll.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ll.fill.Lock()
		defer ll.fill.Unlock()
		ll.mu.Lock()
		unspent := ll.usable(l.store.clock.Now())
		ll.mu.Unlock()
		g, err := l.store.takeLease(ctx, l.cfg.ReplicaID, tokenID, userID, 0, int64(unspent), int64(l.cfg.Chunk), int64(l.cfg.DirectBelow), l.cfg.TTL)
		if err != nil {
			return // the next reservation that needs quota refills itself
		}
		l.takes.Add(1)
		ll.mu.Lock()
		ll.apply(g)
		ll.mu.Unlock()
	}()
}

func (l *Leaser) local(tokenID int64) (*localLease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrLeaserClosed
	}
	ll, ok := l.leases[tokenID]
	if !ok {
		ll = &localLease{}
		l.leases[tokenID] = ll
	}
	return ll, nil
}

// Settle finishes a hold with the actual amount (which may exceed the
// estimate) and returns the Charge to put on the request's usage row. For a
// lease hold the ledger charges the quota when that row is written, and
// Settle does no I/O and cannot fail. A direct hold is settled in the ledger
// now (Store.Settle) and its Charge is the zero value.
func (l *Leaser) Settle(ctx context.Context, h *Hold, actual billing.Quota) (Charge, error) {
	if h.Direct() {
		// Store.Settle is idempotent, so a repeat is harmless.
		return Charge{}, l.store.Settle(ctx, h.requestID, actual)
	}
	if !h.finished.Swap(true) {
		l.giveBack(h, h.amount-actual)
	}
	return Charge{Apply: true, LeaseID: h.leaseID}, nil
}

// Release finishes a hold without charge (refund before any charge). No I/O
// for a lease hold; a direct hold is refunded in the ledger.
func (l *Leaser) Release(ctx context.Context, h *Hold) error {
	if h.Direct() {
		return l.store.Refund(ctx, h.requestID)
	}
	if !h.finished.Swap(true) {
		l.giveBack(h, h.amount)
	}
	return nil
}

// giveBack returns an unused part of a hold to its lease, if that lease is
// still the one the hold came from (a replaced lease was already returned to
// the ledger in full).
func (l *Leaser) giveBack(h *Hold, amount billing.Quota) {
	ll := h.lease
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if !ll.unbounded && ll.id == h.leaseID {
		ll.available += amount
	}
}

// Takes reports how many times the Leaser went to the ledger (a metric: in
// steady state it grows by one per chunk, not per request).
func (l *Leaser) Takes() int64 { return l.takes.Load() }

// Close returns every lease of this replica to the ledger. Drain the usage
// writer first: rows written after their lease was returned are charged to
// the balances directly, which is exact but may dip a balance below zero.
func (l *Leaser) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	leases := l.leases
	l.leases = map[int64]*localLease{}
	l.mu.Unlock()
	l.prefetches.Wait() // a prefetch in flight may still create or grow a lease
	var errs []error
	for _, ll := range leases {
		ll.mu.Lock()
		id := ll.id
		ll.id, ll.available = 0, 0
		ll.mu.Unlock()
		if id == 0 {
			continue
		}
		if _, _, err := l.store.releaseLease(ctx, id, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
