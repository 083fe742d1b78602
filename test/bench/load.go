package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Load is one bounded load run: Concurrency clients, each sending requests
// back to back (closed loop) until Duration has passed or Requests were
// started, whichever comes first.
type Load struct {
	Concurrency int
	Duration    time.Duration
	Requests    int // 0: no count bound
	Client      *http.Client
	// NewRequest builds the next request; rng is the worker's own.
	NewRequest func(rng *rand.Rand) (*http.Request, error)
	// Stream makes a response count as a success only if it ends with [DONE].
	Stream bool
}

// Result of a run. Latency is the time to the last byte of the response.
type Result struct {
	OK, Failed int
	Elapsed    time.Duration
	Latencies  []time.Duration // successful requests, sorted
	Errors     map[string]int  // failure reason -> count
}

// Merge adds another run of the same target: counts, elapsed time and
// latencies (kept sorted).
func (r *Result) Merge(o Result) {
	r.OK += o.OK
	r.Failed += o.Failed
	r.Elapsed += o.Elapsed
	r.Latencies = append(r.Latencies, o.Latencies...)
	slices.Sort(r.Latencies)
	if r.Errors == nil {
		r.Errors = map[string]int{}
	}
	for k, n := range o.Errors {
		r.Errors[k] += n
	}
}

// RPS is successful requests per second.
func (r Result) RPS() float64 { return float64(r.OK) / r.Elapsed.Seconds() }

// Pct returns the p-th percentile latency (0 < p <= 100).
func (r Result) Pct(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies))*p/100+0.5) - 1
	i = min(max(i, 0), len(r.Latencies)-1)
	return r.Latencies[i]
}

// ErrorSummary lists the failure reasons, most frequent first.
func (r Result) ErrorSummary() string {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range r.Errors {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var b strings.Builder
	for i, e := range all {
		if i == 5 {
			break
		}
		fmt.Fprintf(&b, "%d× %s; ", e.n, e.k)
	}
	return b.String()
}

var done = []byte("[DONE]")

// Run drives the load and returns the merged result.
func (l Load) Run(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	var started atomic.Int64
	type worker struct {
		ok, failed int
		lat        []time.Duration
		errs       map[string]int
	}
	ws := make([]worker, l.Concurrency)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range ws {
		wg.Add(1)
		go func(w *worker, seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7919+1))
			buf := make([]byte, 32<<10)
			tail := make([]byte, 0, 128)
			w.lat = make([]time.Duration, 0, 4096)
			w.errs = map[string]int{}
			fail := func(reason string) { w.failed++; w.errs[reason]++ }
			for ctx.Err() == nil {
				if l.Requests > 0 && started.Add(1) > int64(l.Requests) {
					return
				}
				req, err := l.NewRequest(rng)
				if err != nil {
					fail("build request: " + err.Error())
					continue
				}
				t0 := time.Now()
				resp, err := l.Client.Do(req)
				if err != nil {
					if ctx.Err() != nil {
						return // the run's deadline: not a failure
					}
					fail("transport: " + err.Error())
					continue
				}
				var n int64
				tail, n, err = discard(resp.Body, buf, tail)
				resp.Body.Close()
				d := time.Since(t0)
				switch {
				case err != nil:
					fail("read body: " + err.Error())
				case resp.StatusCode != http.StatusOK:
					fail(fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, tail))
				case l.Stream && !bytes.Contains(tail, done):
					fail("stream without [DONE]")
				case n == 0:
					fail("empty body")
				default:
					w.ok++
					w.lat = append(w.lat, d)
				}
			}
		}(&ws[i], uint64(i+1)*0x9E3779B97F4A7C15)
	}
	wg.Wait()
	r := Result{Elapsed: time.Since(begin), Errors: map[string]int{}}
	for _, w := range ws {
		r.OK += w.ok
		r.Failed += w.failed
		r.Latencies = append(r.Latencies, w.lat...)
		for k, n := range w.errs {
			r.Errors[k] += n
		}
	}
	slices.Sort(r.Latencies)
	return r
}
