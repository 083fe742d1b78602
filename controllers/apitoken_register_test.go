package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// countingLedger counts the registration writes; the embedded Ledger is
// nil, so any other call panics.
type countingLedger struct {
	Ledger
	ensured, limited int
	lastLimits       store.TokenLimits
}

func (l *countingLedger) EnsureToken(context.Context, store.TokenSpec) (int64, error) {
	l.ensured++
	return 42, nil
}

func (l *countingLedger) UpdateTokenLimits(_ context.Context, _ int64, lim store.TokenLimits) error {
	l.limited++
	l.lastLimits = lim
	return nil
}

// A reconcile whose registration is unchanged writes nothing to the
// ledger; a changed limit, another key, or a key deleted and made again
// registers again.
func TestRegisterWritesTheLedgerOnlyWhenTheRegistrationChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ledger := &countingLedger{}
	r := &ApiTokenReconciler{Ledger: ledger}
	tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "tenant-a", UID: "uid-1"},
		Spec: v1.ApiTokenSpec{DisplayName: "k", DailyQuota: 1000}}
	tok.Status.UserID = 7

	r.register(ctx, tok)
	g.Expect(tok.Status.TokenID).To(Equal(int64(42)))
	g.Expect(ledger.ensured).To(Equal(1))

	for range 3 { // the usage mirror's status writes wake the token
		r.register(ctx, tok)
	}
	g.Expect(ledger.ensured).To(Equal(1), "unchanged registration: no ledger write")
	g.Expect(ledger.limited).To(Equal(1))

	tok.Spec.DailyQuota = 2000
	r.register(ctx, tok)
	g.Expect(ledger.ensured).To(Equal(2), "a changed limit is written")
	g.Expect(ledger.lastLimits.DailyLimit).To(Equal(billing.Quota(2000)))

	other := tok.DeepCopy()
	other.UID, other.Status.TokenID = "uid-2", 0
	r.register(ctx, other)
	g.Expect(ledger.ensured).To(Equal(3), "another key registers")

	g.Expect(r.disable(ctx, &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}})).To(Succeed()) // never registered: no ledger call
	r.register(ctx, tok)
	g.Expect(ledger.ensured).To(Equal(4), "after a deletion the memo is gone")
}
