package controllers

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultMirrorWritesPerSecond bounds the status writes of mirrored ledger
// figures (token usage, tenant balance) across a manager: half of
// controller-runtime's default client budget (20 requests a second), so
// that provisioning, finalizers and generation tasks keep the other half.
const DefaultMirrorWritesPerSecond = 10

// mirrorBudget spreads the mirrors' status writes over time. Every key used
// since the last period has moved figures, so without a bound a busy fleet
// writes all its statuses within moments of each other once per period: a
// thousand keys cost the API server several seconds of CPU at once (and
// every watcher, the gateways included, as many events), and ten thousand
// would outrun the manager's client rate limit and queue the writes that
// matter behind them. With the budget a write waits for its turn; a key's
// status then trails its usage by up to keys ÷ rate seconds more.
type mirrorBudget struct {
	limiter *rate.Limiter

	mu   sync.Mutex
	held map[types.UID]time.Time // a reserved turn, per object, not taken yet
}

// newMirrorBudget allows perSecond writes a second with bursts of as many
// (≤ 0: DefaultMirrorWritesPerSecond).
func newMirrorBudget(perSecond float64) *mirrorBudget {
	if perSecond <= 0 {
		perSecond = DefaultMirrorWritesPerSecond
	}
	burst := max(int(perSecond), 1)
	return &mirrorBudget{limiter: rate.NewLimiter(rate.Limit(perSecond), burst), held: map[types.UID]time.Time{}}
}

// turn says how long the object must wait before its mirrored figures are
// written: zero means now. A wait reserves the object's turn, so the next
// call at or after it is zero without reserving another: no object starves
// behind the others, and each write costs one turn.
func (b *mirrorBudget) turn(uid types.UID, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.held[uid]; ok {
		if now.Before(at) {
			return at.Sub(now)
		}
		delete(b.held, uid)
		return 0
	}
	wait := b.limiter.ReserveN(now, 1).DelayFrom(now)
	if wait > 0 {
		b.held[uid] = now.Add(wait)
	}
	return wait
}

// forget drops a deleted object's reserved turn.
func (b *mirrorBudget) forget(uid types.UID) {
	if b == nil {
		return
	}
	b.mu.Lock()
	delete(b.held, uid)
	b.mu.Unlock()
}
