package wire

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// A key used before the controller registered it is registered by the
// gateway's authenticator with the spec's credits, not with an empty quota,
// and the controller's registration that follows gets the same ID and leaves
// the balance alone.
func TestResolveTokenIDRegistersCreditsBeforeTheController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ledger, userID := tenantLedger(t)

	tok := &v1.ApiToken{
		ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team-a", UID: "uid-token"},
		Spec: v1.ApiTokenSpec{DisplayName: "ci key", Credits: ptr.To[v1.Decimal]("3"),
			DailyQuota: 5_000, MonthlyQuota: 50_000},
	}
	id, err := resolveTokenID(ledger)(ctx, tok, userID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(BeNumerically(">", 0))
	b, err := ledger.TokenUsage(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Remain).To(Equal(3 * billing.Quota(billing.QuotaPerCredit)))
	g.Expect(b.UserID).To(Equal(userID))

	// The controller comes second with the object it read (status filled in).
	tok.Status.UserID = userID
	spec, err := tokenspec.For(tok, tok.Status.UserID)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := ledger.EnsureToken(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(id))
	b, err = ledger.TokenUsage(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Remain).To(Equal(billing.Quota(7_500)))
}

// The gateway registers nothing for a token whose spec gives no single
// starting balance; the request is then refused as still being provisioned.
func TestResolveTokenIDRefusesAnInvalidSpec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ledger, userID := tenantLedger(t)
	tok := &v1.ApiToken{
		ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team-a", UID: "uid-token"},
		Spec:       v1.ApiTokenSpec{DisplayName: "ci key", Credits: ptr.To[v1.Decimal]("1e3")},
	}
	_, err := resolveTokenID(ledger)(ctx, tok, userID)
	g.Expect(err).To(HaveOccurred())
}

// tenantLedger opens a fresh SQLite ledger with one tenant registered.
func tenantLedger(t *testing.T) (*store.Store, int64) {
	t.Helper()
	ctx := context.Background()
	ledger, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	userID, err := ledger.EnsureTenant(ctx, "uid-tenant", "team-a", "acct")
	if err != nil {
		t.Fatal(err)
	}
	return ledger, userID
}
