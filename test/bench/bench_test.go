package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// go test -run '^$' -bench . ./test/bench: one chat completion (JSON and
// SSE) through the fake upstream alone, through a bare ReverseProxy, and
// through the full gateway (auth, routing, pricing, quota lease, usage row),
// all over loopback. The gateway benchmarks start the whole stack once (a
// few seconds; needs the envtest binaries, see make envtest).

var (
	stackOnce sync.Once
	benchEnv  struct {
		up    *Upstream
		rp    *ReverseProxy
		stack *Stack
		seed  *Seeded
		dir   string
		err   error
	}
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	code := m.Run()
	if benchEnv.stack != nil {
		_ = benchEnv.stack.Stop()
	}
	if benchEnv.rp != nil {
		_ = benchEnv.rp.Close()
	}
	if benchEnv.up != nil {
		_ = benchEnv.up.Close()
	}
	if benchEnv.dir != "" {
		_ = os.RemoveAll(benchEnv.dir)
	}
	os.Exit(code)
}

func upstreamAndProxy(b *testing.B) (*Upstream, *ReverseProxy) {
	b.Helper()
	if benchEnv.up == nil {
		up, err := StartUpstream(UpstreamOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rp, err := StartReverseProxy(up.URL)
		if err != nil {
			b.Fatal(err)
		}
		benchEnv.up, benchEnv.rp = up, rp
	}
	return benchEnv.up, benchEnv.rp
}

func gateway(b *testing.B) (*Stack, *Seeded) {
	b.Helper()
	up, _ := upstreamAndProxy(b)
	stackOnce.Do(func() {
		e := &benchEnv
		if e.dir, e.err = TempDir(); e.err != nil {
			return
		}
		if e.stack, e.err = StartStack(StackOptions{Dir: e.dir}); e.err != nil {
			return
		}
		e.seed, e.err = Seed(context.Background(), e.stack, SeedOptions{Tenants: 2, Tokens: 20, Routes: 10, UpstreamURL: up.URL})
	})
	if benchEnv.err != nil {
		b.Skipf("stack: %v", benchEnv.err)
	}
	return benchEnv.stack, benchEnv.seed
}

func benchChat(b *testing.B, base string, keys, models []string, stream bool) {
	b.Helper()
	c := NewClient()
	defer c.CloseIdleConnections()
	url := base + "/v1/chat/completions"
	bodies := make([][]byte, len(models))
	for i, m := range models {
		s := ""
		if stream {
			s = `,"stream":true,"stream_options":{"include_usage":true}`
		}
		bodies[i] = []byte(`{"model":"` + m + `","messages":[{"role":"user","content":"hi"}],"max_tokens":64` + s + `}`)
	}
	var mu sync.Mutex
	var seq int
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		i := seq
		seq++
		mu.Unlock()
		buf, tail := make([]byte, 32<<10), make([]byte, 0, 128)
		for pb.Next() {
			i++
			body := bodies[i%len(bodies)]
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", keys[i%len(keys)])
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			tail, _, err = discard(resp.Body, buf, tail)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || (stream && !bytes.Contains(tail, done)) {
				b.Errorf("status %d, err %v, tail %q", resp.StatusCode, err, tail)
				return
			}
		}
	})
}

var anyKey = []string{"Bearer sk-bench"}

func BenchmarkChat(b *testing.B) {
	for _, stream := range []bool{false, true} {
		mode := map[bool]string{false: "json", true: "stream"}[stream]
		b.Run("upstream/"+mode, func(b *testing.B) {
			up, _ := upstreamAndProxy(b)
			benchChat(b, up.URL, anyKey, []string{"m"}, stream)
		})
		b.Run("reverseproxy/"+mode, func(b *testing.B) {
			_, rp := upstreamAndProxy(b)
			benchChat(b, rp.URL, anyKey, []string{"m"}, stream)
		})
		b.Run("gateway/"+mode, func(b *testing.B) {
			s, seed := gateway(b)
			benchChat(b, s.BaseURL, seed.Keys, seed.Models, stream)
		})
	}
}

// TestHarnessSmoke runs the load driver briefly against the fake upstream
// (no control plane): the harness itself stays correct under go test ./....
func TestHarnessSmoke(t *testing.T) {
	up, err := StartUpstream(UpstreamOptions{Chunks: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, stream := range []bool{false, true} {
		body := []byte(fmt.Sprintf(`{"model":"m","stream":%v}`, stream))
		r := Load{Concurrency: 4, Duration: 2 * time.Second, Requests: 200, Client: NewClient(), Stream: stream,
			NewRequest: func(_ *rand.Rand) (*http.Request, error) {
				return http.NewRequest(http.MethodPost, up.URL+"/v1/chat/completions", bytes.NewReader(body))
			}}.Run(context.Background())
		if r.OK != 200 || r.Failed != 0 {
			t.Fatalf("stream=%v: ok %d failed %d: %s", stream, r.OK, r.Failed, r.ErrorSummary())
		}
	}
}

func TestResultMerge(t *testing.T) {
	a := Result{OK: 2, Elapsed: time.Second, Latencies: []time.Duration{1, 5}}
	a.Merge(Result{OK: 1, Failed: 1, Elapsed: time.Second, Latencies: []time.Duration{3}, Errors: map[string]int{"x": 1}})
	if a.OK != 3 || a.Failed != 1 || a.RPS() != 1.5 || a.Pct(50) != 3 || a.Errors["x"] != 1 {
		t.Fatalf("merged: %+v", a)
	}
}
