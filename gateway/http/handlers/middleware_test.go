package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
)

// keyTable is an APIKeys of fixed keys: "Authorization: Bearer <key>"
// (and x-api-key where allowed) maps to a principal; anything else fails
// with 401.
type keyTable map[string]*auth.Principal

func (k keyTable) APIKey(_ context.Context, r *http.Request, allowXAPIKey bool) (*auth.Principal, *auth.Failure) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if allowXAPIKey && key == "" {
		key = r.Header.Get("x-api-key")
	}
	if p, ok := k[key]; ok {
		return p, nil
	}
	return nil, &auth.Failure{Status: http.StatusUnauthorized, Message: "invalid API key"}
}

func testPrincipal() *auth.Principal {
	return &auth.Principal{
		Tenant: &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a"}},
		Token:  &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "k"}},
	}
}

func TestAuthenticatedHandsOnThePrincipalOrFails(t *testing.T) {
	g := NewWithT(t)
	want := testPrincipal()
	keys := keyTable{"sk-good": want}
	var got *auth.Principal
	var failed []string
	h := authenticated(keys, true,
		func(w http.ResponseWriter, status int, message string) {
			failed = append(failed, message)
			w.WriteHeader(status)
		},
		func(w http.ResponseWriter, _ *http.Request, p *auth.Principal) {
			got = p
			w.WriteHeader(http.StatusNoContent)
		})

	for _, c := range []struct {
		name, header, value string
		status              int
	}{
		{"bearer", "Authorization", "Bearer sk-good", http.StatusNoContent},
		{"x-api-key", "x-api-key", "sk-good", http.StatusNoContent},
		{"wrong key", "Authorization", "Bearer sk-bad", http.StatusUnauthorized},
		{"no key", "", "", http.StatusUnauthorized},
	} {
		got, failed = nil, nil
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		if c.header != "" {
			r.Header.Set(c.header, c.value)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		g.Expect(rec.Code).To(Equal(c.status), c.name)
		if c.status == http.StatusNoContent {
			g.Expect(got).To(BeIdenticalTo(want), c.name)
			g.Expect(failed).To(BeEmpty(), c.name)
		} else {
			g.Expect(got).To(BeNil(), c.name+": the handler never runs")
			g.Expect(failed).To(Equal([]string{"invalid API key"}), c.name)
		}
	}
}

func TestInstrumentGivesIDAndCountsEveryAnswer(t *testing.T) {
	g := NewWithT(t)
	const endpoint = "middleware_test"
	var seenID string
	inner := authenticated(keyTable{"sk-good": testPrincipal()}, false,
		func(w http.ResponseWriter, status int, message string) { http.Error(w, message, status) },
		func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
			info := infoOf(r.Context())
			seenID = info.id
			info.model, info.backend = "routed-model", "b1"
			w.WriteHeader(http.StatusOK)
		})
	h := instrument(endpoint, "chat", []string{"request-id", "x-request-id"}, inner)

	call := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	ok := call("sk-good")
	g.Expect(ok.Code).To(Equal(http.StatusOK))
	g.Expect(seenID).NotTo(BeEmpty())
	g.Expect(ok.Header().Get("request-id")).To(Equal(seenID))
	g.Expect(ok.Header().Get("x-request-id")).To(Equal(seenID))
	first := seenID
	g.Expect(call("sk-good").Header().Get("x-request-id")).To(And(Equal(seenID), Not(Equal(first))), "one ID per request")

	refused := call("sk-bad")
	g.Expect(refused.Code).To(Equal(http.StatusUnauthorized))
	g.Expect(refused.Header().Get("x-request-id")).NotTo(BeEmpty(), "a refusal carries its ID too")

	// The handler's labels for a routed answer; "unknown" model for a
	// refusal before routing, so client text never becomes a label.
	g.Expect(testutil.ToFloat64(metrics.Requests.WithLabelValues(endpoint, "routed-model", "b1", "200"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(metrics.Requests.WithLabelValues(endpoint, "unknown", "", "401"))).To(Equal(1.0))
}

func TestInfoOfWithoutInstrument(t *testing.T) {
	g := NewWithT(t)
	info := infoOf(context.Background())
	g.Expect(info.id).To(BeEmpty())
	g.Expect(info.span.IsRecording()).To(BeFalse())
}
