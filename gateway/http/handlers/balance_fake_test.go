package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// fakeBalances is the part of the ledger the balance endpoints read; the
// embedded Ledger is nil, so any other call panics.
type fakeBalances struct {
	Ledger
	tenant        store.Balance
	token         store.TokenBalance
	leased        billing.Quota
	failTenant    error
	failTokenUsed error
}

func (f *fakeBalances) TenantStanding(context.Context, int64) (store.Balance, billing.Quota, billing.Quota, error) {
	return f.tenant, f.leased, 0, f.failTenant
}
func (f *fakeBalances) TokenStanding(context.Context, int64) (store.TokenBalance, store.TokenHolds, error) {
	return f.token, store.TokenHolds{Leased: f.leased}, f.failTokenUsed
}

// balanceOver mounts the balance endpoints over a fake ledger behind the
// real middleware, with the one key "sk-good".
func balanceOver(f *fakeBalances) http.Handler {
	mux := http.NewServeMux()
	b := &Balance{Ledger: f}
	keys := keyTable{"sk-good": testPrincipal()}
	mux.Handle("GET /v1/user/balance", cors(authenticated(keys, false, simpleFail, b.User)))
	mux.Handle("GET /v1/balance", authenticated(keys, false, simpleFail, b.Token))
	return mux
}

func getJSON(g Gomega, h http.Handler, path, key string) (int, map[string]any) {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var body map[string]any
	g.Expect(json.Unmarshal(rec.Body.Bytes(), &body)).To(Succeed(), rec.Body.String())
	return rec.Code, body
}

// Leased quota is the tenant's, held by a replica: it counts as remaining.
func TestUserBalanceCountsLeasesAsRemaining(t *testing.T) {
	g := NewWithT(t)
	f := &fakeBalances{tenant: store.Balance{Remain: 1_000_000, Used: 250_000}, leased: 250_000}
	status, body := getJSON(g, balanceOver(f), "/v1/user/balance", "sk-good")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(HaveKeyWithValue("success", true))
	g.Expect(body).To(HaveKeyWithValue("remain_balance", 2.5)) // (1 000 000 + 250 000) / 500 000 USD
	g.Expect(body).To(HaveKeyWithValue("used_balance", 0.5))
	g.Expect(body).To(HaveKeyWithValue("remain_credits", 500.0))
	g.Expect(body).To(HaveKeyWithValue("unlimited_quota", false))
}

func TestBalanceFailuresUseTheContractsShape(t *testing.T) {
	g := NewWithT(t)
	f := &fakeBalances{failTenant: errors.New("ledger down"), failTokenUsed: errors.New("ledger down")}
	h := balanceOver(f)

	status, body := getJSON(g, h, "/v1/user/balance", "sk-good")
	g.Expect(status).To(Equal(http.StatusOK), "the contract answers 200 with success false")
	g.Expect(body).To(Equal(map[string]any{"success": false, "message": msgNoUsedQuota}), "a query error")

	f.failTenant = fmt.Errorf("tenant 1: %w", store.ErrNotFound)
	status, body = getJSON(g, h, "/v1/user/balance", "sk-good")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal(map[string]any{"success": false, "message": msgNoUserQuota}), "no such user")

	status, body = getJSON(g, h, "/v1/balance", "sk-good")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal(map[string]any{"success": false, "message": msgNoTokenQuota}))

	status, body = getJSON(g, h, "/v1/balance", "sk-nope")
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(body).To(HaveKeyWithValue("success", false))
}

func TestTokenBalanceOfTheCallingKey(t *testing.T) {
	g := NewWithT(t)
	f := &fakeBalances{token: store.TokenBalance{Balance: store.Balance{Remain: 400, Used: 100}}, leased: 100}
	status, body := getJSON(g, balanceOver(f), "/v1/balance", "sk-good")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(HaveKeyWithValue("remain_quota", 500.0))
	g.Expect(body).To(HaveKeyWithValue("used_quota", 100.0))
}
