// Package periodic runs a background job at once and then at a fixed
// interval until its context ends: the loop of the cleanup jobs.
package periodic

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Run calls fn now and then every interval on c until ctx is done.
func Run(ctx context.Context, c clock.WithTicker, interval time.Duration, fn func(context.Context)) {
	t := c.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Ticking is c when it can tick, else the real clock (a test's passive
// clock still drives the jobs' "now", but not their schedule).
func Ticking(c clock.PassiveClock) clock.WithTicker {
	if tc, ok := c.(clock.WithTicker); ok {
		return tc
	}
	return clock.RealClock{}
}
