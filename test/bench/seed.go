package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/test/framework"
)

// SeedOptions say how much to load.
type SeedOptions struct {
	Tenants, Tokens, Routes int
	Writers                 int    // concurrent API-server writers (default 64)
	UpstreamURL             string // the routes' backend base URL
	ReadyTimeout            time.Duration
	Log                     func(format string, args ...any)
}

// Seeded is what the load needs: the keys and the model names.
type Seeded struct {
	Keys   []string // "Bearer sk-…"
	Models []string
}

const credentialSecret = "bench-upstream"

// Seed creates Tenants (one namespace each, with credits), Tokens spread
// over them (spec.keyHash, as POST /v1/tokens does: no key Secret to make),
// platform ModelRoutes pointing at the upstream with provider "openai" and a
// credential Secret, and a PriceRule per model; then waits until the
// controllers have made all of them ready (tokens registered in the ledger,
// routes ready, prices published) so the load measures the steady state.
func Seed(ctx context.Context, s *Stack, o SeedOptions) (*Seeded, error) {
	if o.Writers <= 0 {
		o.Writers = 64
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	c := s.Client
	sys := framework.SystemNamespace
	out := &Seeded{Keys: make([]string, o.Tokens), Models: make([]string, o.Routes)}

	// Upstream credential, routes and prices.
	begin := time.Now()
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentialSecret, Namespace: sys},
		StringData: map[string]string{"apiKey": "sk-bench-upstream"}}); err != nil {
		return nil, err
	}
	var objs []client.Object
	for i := range o.Routes {
		m := fmt.Sprintf("bench-model-%04d", i)
		out.Models[i] = m
		out := v1.Decimal("15")
		objs = append(objs,
			&v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: m, Namespace: sys}, Spec: v1.ModelRouteSpec{
				Model: v1.ModelID(m), Type: v1.ModelTypeText, MaxOutputTokens: 4096,
				Backends: []v1.Backend{{Name: "fake", Provider: "openai", BaseURL: o.UpstreamURL + "/v1", Weight: 1,
					Groups:              []v1.GroupName{v1.DefaultGroup},
					CredentialSecretRef: &v1.SecretKeyRef{Name: credentialSecret, Key: "apiKey"}}},
			}},
			&v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: m, Namespace: sys}, Spec: v1.PriceRuleSpec{
				Model: v1.ModelID(m), ChargeType: v1.ChargePerToken, PriceBasis: v1.BasisTextInputTokens,
				Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out,
			}})
	}
	// Tenants, one namespace each.
	credits := v1.Decimal("1000000")
	var tenants []client.Object
	for i := range o.Tenants {
		ns := fmt.Sprintf("bench-t%03d", i)
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		tenants = append(tenants, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acct", Namespace: ns},
			Spec: v1.TenantSpec{DisplayName: ns, Grants: []v1.Grant{{ID: "bench", Credits: &credits}}}})
	}
	if err := createAll(ctx, c, o.Writers, objs); err != nil {
		return nil, err
	}
	if err := createAll(ctx, c, o.Writers, tenants); err != nil {
		return nil, err
	}
	o.Log("created %d routes, %d price rules, %d tenants in %s", o.Routes, o.Routes, o.Tenants, time.Since(begin).Round(time.Millisecond))
	if err := waitCount(ctx, o, "tenants ready", o.Tenants, func() (int, error) {
		l := &v1.TenantList{}
		err := s.Cache.List(ctx, l)
		return count(l.Items, func(t *v1.Tenant) bool { return ready(t.Status.Conditions) && t.Status.UserID != 0 }), err
	}); err != nil {
		return nil, err
	}

	// Tokens: keys made here, only their hashes stored.
	begin = time.Now()
	quota := int64(100_000 * billing.QuotaPerUSD)
	toks := make([]client.Object, o.Tokens)
	for i := range o.Tokens {
		key, err := keys.NewAPIKey()
		if err != nil {
			return nil, err
		}
		out.Keys[i] = "Bearer " + key
		toks[i] = &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("key-%05d", i),
			Namespace: fmt.Sprintf("bench-t%03d", i%o.Tenants)},
			Spec: v1.ApiTokenSpec{DisplayName: fmt.Sprintf("bench key %d", i), KeyHash: keys.Hash(key),
				KeyPrefix: keys.DisplayPrefix(key), Quota: &quota}}
	}
	if err := createAll(ctx, c, o.Writers, toks); err != nil {
		return nil, err
	}
	o.Log("created %d tokens with %d writers in %s", o.Tokens, o.Writers, time.Since(begin).Round(time.Millisecond))

	if err := waitCount(ctx, o, "routes ready", o.Routes, func() (int, error) {
		l := &v1.ModelRouteList{}
		err := s.Cache.List(ctx, l)
		return count(l.Items, func(r *v1.ModelRoute) bool { return ready(r.Status.Conditions) }), err
	}); err != nil {
		return nil, err
	}
	if err := waitCount(ctx, o, "prices published", o.Routes, func() (int, error) {
		l := &v1.PriceRuleList{}
		err := s.Cache.List(ctx, l)
		return count(l.Items, func(r *v1.PriceRule) bool {
			return meta.IsStatusConditionTrue(r.Status.Conditions, v1.ConditionPublished)
		}), err
	}); err != nil {
		return nil, err
	}
	if err := waitCount(ctx, o, "tokens registered", o.Tokens, func() (int, error) {
		l := &v1.ApiTokenList{}
		err := s.Cache.List(ctx, l)
		return count(l.Items, func(t *v1.ApiToken) bool { return ready(t.Status.Conditions) && t.Status.TokenID != 0 }), err
	}); err != nil {
		return nil, err
	}
	return out, nil
}

func ready(c []metav1.Condition) bool { return meta.IsStatusConditionTrue(c, v1.ConditionReady) }

func count[T any](items []T, f func(*T) bool) int {
	n := 0
	for i := range items {
		if f(&items[i]) {
			n++
		}
	}
	return n
}

func waitCount(ctx context.Context, o SeedOptions, what string, want int, f func() (int, error)) error {
	begin, last := time.Now(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.ReadyTimeout, true, func(context.Context) (bool, error) {
		n, err := f()
		if err != nil {
			return false, nil
		}
		if time.Since(last) > 10*time.Second {
			o.Log("  %s: %d/%d", what, n, want)
			last = time.Now()
		}
		return n >= want, nil
	})
	if err != nil {
		n, _ := f()
		return fmt.Errorf("%s: %d of %d after %s: %w", what, n, want, o.ReadyTimeout, err)
	}
	o.Log("%s: %d after %s", what, want, time.Since(begin).Round(time.Millisecond))
	return nil
}

// createAll creates objs with n concurrent writers.
func createAll(ctx context.Context, c client.Client, n int, objs []client.Object) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(objs) {
					return
				}
				if err := c.Create(ctx, objs[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create %T %s: %w", objs[i], client.ObjectKeyFromObject(objs[i]), err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
