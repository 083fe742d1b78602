package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// step returns a Step that reports res and records that it ran.
func step(cond string, res Result, ran *[]string, opts ...func(*Step[struct{}])) Step[struct{}] {
	s := Step[struct{}]{Condition: cond, Run: func(context.Context, struct{}) Result {
		*ran = append(*ran, cond)
		return res
	}}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func independent(s *Step[struct{}])   { s.Independent = true }
func informational(s *Step[struct{}]) { s.Informational = true }

func TestRun(t *testing.T) {
	errLedger := errors.New("ledger down")
	errAPI := errors.New("api down")
	tests := []struct {
		name      string
		steps     func(ran *[]string) []Step[struct{}]
		wantRan   []string
		wantStat  []metav1.ConditionStatus // per outcome, "" = kept
		wantErr   []error
		wantAfter time.Duration
		wantClean bool
	}{{
		name: "every step done: clean, smallest requeue",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", Done("Ok", "a").After(30*time.Second), ran),
				step("B", Done("Ok", "b"), ran),
				step("C", Done("Ok", "c").After(5*time.Second), ran),
			}
		},
		wantRan:   []string{"A", "B", "C"},
		wantStat:  []metav1.ConditionStatus{"True", "True", "True"},
		wantAfter: 5 * time.Second,
		wantClean: true,
	}, {
		name: "a step not done blocks the later ones",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", Done("Ok", "a"), ran),
				step("B", NotDone("Bad", "b is bad"), ran),
				step("C", Done("Ok", "c"), ran),
			}
		},
		wantRan:  []string{"A", "B"},
		wantStat: []metav1.ConditionStatus{"True", "False", "False"},
	}, {
		name: "an independent step does not block; errors of both are joined",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", Failed("Down", errAPI), ran, independent),
				step("B", Failed("Down", errLedger), ran),
				step("C", Done("Ok", "c"), ran),
			}
		},
		wantRan:  []string{"A", "B"},
		wantStat: []metav1.ConditionStatus{"False", "False", "False"},
		wantErr:  []error{errAPI, errLedger},
	}, {
		name: "an informational step holds nothing up either",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", NotDone("Bad", "a"), ran, informational),
				step("B", Done("Ok", "b"), ran),
			}
		},
		wantRan:   []string{"A", "B"},
		wantStat:  []metav1.ConditionStatus{"False", "True"},
		wantClean: true,
	}, {
		name: "a kept failure keeps what follows as it was",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", Kept(errLedger), ran),
				step("B", Done("Ok", "b"), ran),
			}
		},
		wantRan:  []string{"A"},
		wantStat: []metav1.ConditionStatus{"", ""},
		wantErr:  []error{errLedger},
	}, {
		name: "a step that does not apply blocks nothing",
		steps: func(ran *[]string) []Step[struct{}] {
			return []Step[struct{}]{
				step("A", NotApplicable(), ran),
				step("B", Done("Ok", "b"), ran),
			}
		},
		wantRan:   []string{"A", "B"},
		wantStat:  []metav1.ConditionStatus{"", "True"},
		wantClean: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var ran []string
			rep := Run(context.Background(), struct{}{}, tt.steps(&ran))
			g.Expect(ran).To(Equal(tt.wantRan))
			var got []metav1.ConditionStatus
			for _, o := range rep.Outcomes {
				got = append(got, o.Status)
			}
			g.Expect(got).To(Equal(tt.wantStat))
			for _, e := range tt.wantErr {
				g.Expect(rep.Err).To(MatchError(e))
			}
			if tt.wantErr == nil {
				g.Expect(rep.Err).NotTo(HaveOccurred())
			}
			g.Expect(rep.RequeueAfter).To(Equal(tt.wantAfter))
			g.Expect(rep.Clean()).To(Equal(tt.wantClean))
		})
	}
}

func TestBlockedMessageNamesTheCause(t *testing.T) {
	g := NewWithT(t)
	var ran []string
	rep := Run(context.Background(), struct{}{}, []Step[struct{}]{
		{Run: func(context.Context, struct{}) Result {
			return NotDone("DuplicateTenant", "namespace x already has Tenant %q", "a")
		}},
		step("Registered", Done("Ok", "r"), &ran),
	})
	g.Expect(rep.Outcomes[1].Reason).To(Equal(v1.ReasonBlocked))
	g.Expect(rep.Outcomes[1].Message).To(Equal(`not attempted: namespace x already has Tenant "a"`))

	rep = Run(context.Background(), struct{}{}, []Step[struct{}]{
		step("Registered", NotDone("LedgerUnavailable", "down"), &ran),
		step("GrantsApplied", Done("Ok", "g"), &ran),
	})
	g.Expect(rep.Outcomes[1].Message).To(Equal("not attempted: Registered is False (LedgerUnavailable)"))
}
