package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// OpenStreams is the many-streams measurement: N streams held open at once
// through one target, and the memory the process holds for them.
type OpenStreams struct {
	N int
	// Ramp is how many streams are being opened at a time.
	Ramp       int
	Client     *http.Client
	NewRequest func(rng *rand.Rand) (*http.Request, error)
	// Upstream is held after its first chunk until every stream is open;
	// nil for an upstream in another process that is slow on its own.
	Upstream *Upstream
	// Abandon ends the streams after the measurement by hanging up instead
	// of reading them to their end (a slow upstream's streams last long).
	Abandon bool
	// Settle is how long every stream stays open before the peak is
	// measured: what a stream holds once it has run a while and waits
	// between events, not what it holds while it opens.
	Settle time.Duration
	// Snapshot, when set, runs after each measurement: "before" the first
	// stream and at the "peak" with every stream open (heap profiles whose
	// difference is what the streams hold).
	Snapshot func(stage string)
}

// OpenResult is one OpenStreams run.
type OpenResult struct {
	Opened, Completed int
	// Held is the growth of the Go heap and stacks in use (after a GC) with
	// every stream open, over the same figure before the first one.
	Held       uint64
	Stacks     uint64 // the part of Held that is goroutine stacks
	Goroutines int    // growth of the goroutine count, likewise
	OpenTime   time.Duration
	Errors     map[string]int
}

// PerStream is Held divided by the streams open.
func (r OpenResult) PerStream() uint64 {
	if r.Opened == 0 {
		return 0
	}
	return r.Held / uint64(r.Opened)
}

// Run opens the streams (each reads until the upstream's first chunk
// arrives), measures, then releases the upstream so every stream ends
// normally, reads each to its end and waits for all.
func (o OpenStreams) Run(ctx context.Context) OpenResult {
	res := OpenResult{Errors: map[string]int{}}
	var mu sync.Mutex
	fail := func(reason string) {
		mu.Lock()
		res.Errors[reason]++
		mu.Unlock()
	}
	before, st0, g0 := inUse()
	if o.Snapshot != nil {
		o.Snapshot("before")
	}
	release := func() {}
	if o.Upstream != nil {
		release = o.Upstream.Hold()
	}
	defer release()
	ctx, hangUp := context.WithCancel(ctx)
	defer hangUp()

	var opened, completed atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	slots := make(chan struct{}, max(o.Ramp, 1))
	begin := time.Now()
	for i := range o.N {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			req, err := o.NewRequest(rng)
			if err != nil {
				<-slots
				fail(err.Error())
				return
			}
			resp, err := o.Client.Do(req.WithContext(ctx))
			if err != nil {
				<-slots
				fail(shortError(err))
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 512)
			if resp.StatusCode != http.StatusOK {
				<-slots
				fail(fmt.Sprintf("status %d", resp.StatusCode))
				return
			}
			// The first event's blank line: the stream is open end to end.
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					<-slots
					fail("before the first event: " + shortError(err))
					return
				}
				if len(line) <= 2 { // "\n" or "\r\n"
					break
				}
			}
			opened.Add(1)
			<-slots
			<-done
			if _, err := io.Copy(io.Discard, br); err == nil {
				completed.Add(1)
			} else if !o.Abandon {
				fail("after release: " + shortError(err))
			}
		}()
	}
	// Every stream is open or has failed once all slots are free again.
	for range cap(slots) {
		slots <- struct{}{}
	}
	res.OpenTime = time.Since(begin)
	res.Opened = int(opened.Load())
	time.Sleep(o.Settle)
	after, st1, g1 := inUse()
	res.Held, res.Stacks, res.Goroutines = after-min(before, after), st1-min(st0, st1), g1-g0
	if o.Snapshot != nil {
		o.Snapshot("peak")
	}
	if o.Abandon {
		hangUp()
	}
	close(done)
	release()
	wg.Wait()
	res.Completed = int(completed.Load())
	return res
}

// inUse is the heap and stack memory in use after a collection, the stacks
// alone, and the number of goroutines.
func inUse() (uint64, uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, m.StackInuse, runtime.NumGoroutine()
}

func shortError(err error) string {
	var op interface{ Timeout() bool }
	if errors.As(err, &op) && op.Timeout() {
		return "timeout"
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// RaiseOpenFiles lifts this process's open-file limit to at least n if it
// can (raising the hard limit needs privileges) and returns the soft limit
// in force afterwards.
func RaiseOpenFiles(n uint64) uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur >= n {
		return l.Cur
	}
	want := syscall.Rlimit{Cur: n, Max: max(l.Max, n)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max} // at least the hard limit
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur
		}
	}
	return want.Cur
}
