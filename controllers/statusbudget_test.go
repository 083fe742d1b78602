package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

func TestMirrorBudgetSpreadsWritesAndKeepsTurns(t *testing.T) {
	g := NewWithT(t)
	b := newMirrorBudget(2) // 2 writes a second, bursts of 2
	t0 := time.Unix(1_780_000_000, 0)

	// Five objects due at once: two write now, the others get turns half a
	// second apart.
	var waits []time.Duration
	for _, uid := range []types.UID{"a", "b", "c", "d", "e"} {
		waits = append(waits, b.turn(uid, t0))
	}
	g.Expect(waits).To(Equal([]time.Duration{0, 0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}))

	// An early return keeps the turn (and does not take another); at the
	// turn the object writes without a new reservation, so "e" keeps its
	// place behind "d" and a newcomer queues behind them all.
	g.Expect(b.turn("d", t0.Add(400*time.Millisecond))).To(Equal(600 * time.Millisecond))
	g.Expect(b.turn("c", t0.Add(500*time.Millisecond))).To(BeZero())
	g.Expect(b.turn("d", t0.Add(time.Second))).To(BeZero())
	g.Expect(b.turn("f", t0.Add(time.Second))).To(Equal(time.Second))
	g.Expect(b.turn("e", t0.Add(1600*time.Millisecond))).To(BeZero())

	// A deleted object's turn is dropped; a budget that was never set
	// never waits.
	b.forget("f")
	g.Expect(b.held).To(BeEmpty())
	var none *mirrorBudget
	g.Expect(none.turn("x", t0)).To(BeZero())
}
