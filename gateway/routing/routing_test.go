package routing

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func route(backends ...v1.Backend) *v1.ModelRoute {
	rt := &v1.ModelRoute{Spec: v1.ModelRouteSpec{Model: "m", Backends: backends}}
	rt.Name, rt.Namespace = "m", "sys"
	for _, b := range backends {
		rt.Status.Backends = append(rt.Status.Backends, v1.BackendStatus{Name: b.Name, Ready: b.Name != "broken"})
	}
	return rt
}

func names(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Backend.Name)
	}
	return out
}

func TestPlanOrdersTiersAndSkipsUnready(t *testing.T) {
	g := NewWithT(t)
	rt := route(
		v1.Backend{Name: "backup", Priority: 10, Weight: 1, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "main", Priority: 0, Weight: 1, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "broken", Priority: 0, Weight: 100, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "off", Priority: 0, Weight: 1, Disabled: true},
		v1.Backend{Name: "vip-only", Priority: 0, Weight: 1, Groups: []v1.GroupName{"vip"}},
	)
	r := &Router{Float: func() float64 { return 0 }}
	g.Expect(names(r.Plan(rt, []string{"default"}))).To(Equal([]string{"main", "backup"}))
	g.Expect(names(r.Plan(rt, []string{"vip"}))).To(Equal([]string{"vip-only"}))
	// Cross-group fallback: the key's group first, then the others.
	g.Expect(names(r.Plan(rt, []string{"vip", "default"}))).To(Equal([]string{"vip-only", "main", "backup"}))
}

func TestWeightedRandomFollowsWeights(t *testing.T) {
	g := NewWithT(t)
	rt := route(
		v1.Backend{Name: "heavy", Weight: 3, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "light", Weight: 1, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "spare", Weight: 0, Groups: []v1.GroupName{"default"}},
	)
	// A fixed sequence of draws: x in [0,0.75) picks heavy first.
	draws := []float64{0.1, 0.5, 0.74, 0.76, 0.9, 0.2, 0.3, 0.8}
	i := 0
	r := &Router{Float: func() float64 { v := draws[i%len(draws)]; i++; return v }}
	first := map[string]int{}
	for range 4 {
		plan := names(r.Plan(rt, []string{"default"}))
		g.Expect(plan).To(HaveLen(3))
		g.Expect(plan[2]).To(Equal("spare"), "weight 0 goes last")
		first[plan[0]]++
	}
	g.Expect(first["heavy"]).To(BeNumerically(">", first["light"]))
}

func TestBreakerCoolsDownAndProbes(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	b := &Breaker{Threshold: 2, Cooldown: 10 * time.Second, MaxCooldown: 40 * time.Second, Clock: clk}
	rt := route(
		v1.Backend{Name: "a", Weight: 1, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "b", Weight: 1, Groups: []v1.GroupName{"default"}},
	)
	r := &Router{Breaker: b, Float: func() float64 { return 0 }}
	key := r.Plan(rt, []string{"default"})[0].Key()
	g.Expect(key).To(Equal("sys/m/a"))

	b.Failure(key)
	g.Expect(b.Allow(key)).To(BeTrue(), "below the threshold")
	b.Failure(key)
	g.Expect(b.Allow(key)).To(BeFalse(), "open")
	g.Expect(names(r.Plan(rt, []string{"default"}))).To(Equal([]string{"b", "a"}), "a cooling backend goes last")

	clk.SetTime(clk.Now().Add(11 * time.Second))
	g.Expect(b.Allow(key)).To(BeTrue(), "half-open: one probe")
	g.Expect(b.Allow(key)).To(BeFalse(), "only one probe at a time")
	b.Failure(key) // the probe failed: cooldown doubles
	clk.SetTime(clk.Now().Add(11 * time.Second))
	g.Expect(b.Allow(key)).To(BeFalse())
	clk.SetTime(clk.Now().Add(10 * time.Second))
	g.Expect(b.Allow(key)).To(BeTrue())
	b.Success(key)
	g.Expect(b.Allow(key)).To(BeTrue())
	g.Expect(b.Allow(key)).To(BeTrue(), "closed again")
}

func TestBreakerHold(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	b := &Breaker{Threshold: 3, Cooldown: 10 * time.Second, MaxCooldown: 40 * time.Second, Clock: clk}
	rt := route(
		v1.Backend{Name: "a", Weight: 1, Groups: []v1.GroupName{"default"}},
		v1.Backend{Name: "b", Weight: 1, Groups: []v1.GroupName{"default"}},
	)
	r := &Router{Breaker: b, Float: func() float64 { return 0 }}
	key := r.Plan(rt, []string{"default"})[0].Key()

	b.Hold(key, 0)
	g.Expect(b.Allow(key)).To(BeTrue(), "no wait, no hold")
	b.Failure(key)
	b.Hold(key, 20*time.Second)
	b.Hold(key, 5*time.Second) // a shorter wait does not shorten the hold
	g.Expect(b.Allow(key)).To(BeFalse(), "held below the failure threshold")
	g.Expect(names(r.Plan(rt, []string{"default"}))).To(Equal([]string{"b", "a"}), "a held backend goes last")
	clk.SetTime(clk.Now().Add(21 * time.Second))
	g.Expect(b.Allow(key)).To(BeTrue(), "the wait is over")

	b.Hold(key, time.Minute)
	b.Success(key)
	g.Expect(b.Allow(key)).To(BeTrue(), "a success ends the hold")
}
