package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/test/framework"
)

// BenchmarkAuthenticate measures API-key authentication against the real
// informer cache of a real API server holding many tokens (default 100 000;
// MODELGATE_BENCH_TOKENS changes it). Setup creates the objects once and
// takes a minute or two; the timed loop is the per-request lookup.
func BenchmarkAuthenticate(b *testing.B) {
	// testing runs a benchmark function more than once (N=1, then N); the
	// expensive setup is shared between the runs.
	benchOnce.Do(func() { benchSetup, benchErr = setupAuthBench(b) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	a, reqs := benchSetup.a, benchSetup.reqs
	ctx := context.Background()
	if _, f := a.APIKey(ctx, reqs[0], false); f != nil {
		b.Fatalf("a known key was refused: %s", f.Message)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, f := a.APIKey(ctx, reqs[i%len(reqs)], false); f != nil {
			b.Fatal(f.Message)
		}
	}
}

var (
	benchOnce  sync.Once
	benchSetup struct {
		a    *auth.Authenticator
		reqs []*http.Request
	}
	benchErr error
)

// benchEnv is stopped by TestMain once every benchmark has run.
var benchEnv *framework.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if benchEnv != nil {
		_ = benchEnv.Stop()
	}
	os.Exit(code)
}

// setupAuthBench starts a control plane, fills it and syncs a cache.
func setupAuthBench(b *testing.B) (s struct {
	a    *auth.Authenticator
	reqs []*http.Request
}, err error) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("MODELGATE_BENCH_TOKENS")); err == nil && v > 0 {
		n = v
	}
	env, err := framework.Start()
	if err != nil {
		return s, err
	}
	benchEnv = env
	ctx := context.Background()

	ns := framework.NewNamespace("bench")
	if err := env.Client.Create(ctx, ns); err != nil {
		return s, err
	}
	tenant := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns.Name}}
	if err := env.Client.Create(ctx, tenant); err != nil {
		return s, err
	}
	tenant.Status = v1.TenantStatus{UserID: 1, Conditions: []metav1.Condition{{Type: v1.ConditionReady,
		Status: metav1.ConditionTrue, Reason: "Bench", LastTransitionTime: metav1.Now()}}}
	if err := env.Client.Status().Update(ctx, tenant); err != nil {
		return s, err
	}
	keyList := createTokens(b, env, ns.Name, n)

	cache, err := ctrlcache.New(env.Config, ctrlcache.Options{Scheme: env.Scheme})
	if err != nil {
		return s, err
	}
	lookup, err := index.NewLookup(ctx, cache)
	if err != nil {
		return s, err
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		return s, fmt.Errorf("cache did not sync")
	}
	s.a = &auth.Authenticator{Lookup: lookup, Clock: clock.RealClock{},
		ResolveTokenID: func(context.Context, *v1.ApiToken, int64) (int64, error) { return 1, nil }}
	for _, k := range keyList {
		req, _ := http.NewRequest("GET", "/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+k)
		s.reqs = append(s.reqs, req)
	}
	return s, nil
}

// createTokens makes n ApiTokens carrying key hashes (as POST /v1/tokens
// does) with 32 writers, and returns some of their keys.
func createTokens(b *testing.B, env *framework.Env, ns string, n int) []string {
	b.Helper()
	start := time.Now()
	sample := make([]string, 0, 1024)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				key, _ := keys.NewAPIKey()
				tok := &v1.ApiToken{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%06d", i), Namespace: ns},
					Spec:       v1.ApiTokenSpec{DisplayName: "bench", KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key)},
				}
				if err := env.Client.Create(context.Background(), tok); err != nil {
					errs <- err
					return
				}
				if i%(n/1000+1) == 0 {
					mu.Lock()
					sample = append(sample, key)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d tokens in %s", n, time.Since(start).Round(time.Second))
	return sample
}
