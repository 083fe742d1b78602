package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// The other specs reach most endpoints; this one calls those they reach
// only through handler tests, so that their answers on the real stack are
// validated against /openapi.json too (the suite's AfterEach fails a spec
// that received an answer the document does not describe).
var _ = Describe("The API reference", func() {
	call := func(method, path, auth string, header map[string]string, body string) (int, http.Header, string) {
		GinkgoHelper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, stack.BaseURL+path, rd)
		Expect(err).NotTo(HaveOccurred())
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, resp.Header, string(b)
	}

	It("is served at /openapi.json with an ETag, and the account, usage and task endpoints answer as it says", func(ctx SpecContext) {
		status, h, body := call("GET", "/openapi.json", "", nil, "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(`"openapi":"3.1.0"`))
		status, _, _ = call("GET", "/openapi.json", "", map[string]string{"If-None-Match": h.Get("ETag")}, "")
		Expect(status).To(Equal(http.StatusNotModified))
		for _, p := range []string{"/healthz", "/readyz"} {
			status, _, _ = call("GET", p, "", nil, "")
			Expect(status).To(Equal(http.StatusOK), p)
		}

		acct := newAccount(GinkgoTB(), v1.TenantSpec{}, v1.ApiTokenSpec{})
		status, _, body = call("POST", "/v1/tokens", acct.Key, nil, `{"name":"from the api","remain_credits":10}`)
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(`"success":true`))
		status, _, body = call("POST", "/v1/tokens", acct.Key, nil, fmt.Sprintf(`{"name":%q}`, strings.Repeat("n", 51)))
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(`"success":false`))
		status, _, _ = call("POST", "/v1/tokens", "sk-nope", nil, `{"name":"x"}`)
		Expect(status).To(Equal(http.StatusUnauthorized))

		for _, p := range []string{"/v1/user/balance", "/user/balance", "/v1/balance"} {
			status, _, body = call("GET", p, acct.Key, nil, "")
			Expect(status).To(Equal(http.StatusOK), p)
			Expect(body).To(ContainSubstring(`"success":true`), p)
		}
		status, _, _ = call("OPTIONS", "/v1/user/balance", "", map[string]string{"Origin": "https://example.test"}, "")
		Expect(status).To(Equal(http.StatusNoContent))

		secret := &corev1.Secret{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: acct.Tenant.Status.AccessTokenSecretName}, secret)).To(Succeed())
		user := map[string]string{"X-User-Id": fmt.Sprint(acct.Tenant.Status.UserID)}
		access := string(secret.Data[v1.AccessTokenSecretKey])
		now := time.Now().Unix()
		window := fmt.Sprintf("?start_timestamp=%d&end_timestamp=%d", now-3600, now+60)
		for _, p := range []string{"/api/usage/tokens/requests", "/api/usage/tokens/summary"} {
			status, _, body = call("GET", p+window, access, user, "")
			Expect(status).To(Equal(http.StatusOK), p)
			Expect(body).To(ContainSubstring(`"meta"`), p)
			status, _, _ = call("GET", p+window+"&bogus=1", access, user, "")
			Expect(status).To(Equal(http.StatusUnprocessableEntity), p)
			status, _, _ = call("GET", p+window, "wrong", user, "")
			Expect(status).To(Equal(http.StatusUnauthorized), p)
		}

		for _, typ := range []string{"images", "videos"} {
			base := "/v1/" + typ + "/generations"
			status, _, _ = call("GET", base, acct.Key, nil, "")
			Expect(status).To(Equal(http.StatusBadRequest), base)
			status, _, body = call("GET", base+"?ids=task-nope,task-nope-2", acct.Key, nil, "")
			Expect(status).To(Equal(http.StatusOK), base)
			Expect(body).To(ContainSubstring(`"not_found":["task-nope","task-nope-2"]`), base)
			status, _, _ = call("GET", base+"/task-nope", acct.Key, nil, "")
			Expect(status).To(Equal(http.StatusNotFound), base)
			status, _, _ = call("POST", base, acct.Key, nil, `not json`)
			Expect(status).To(Equal(http.StatusBadRequest), base)
		}
		status, _, _ = call("POST", "/v1/uploads/images", acct.Key, nil, `{}`)
		Expect(status).To(Equal(http.StatusBadRequest), "an upload must be multipart")
		status, _, _ = call("GET", "/v1/models/no/such/model", acct.Key, nil, "")
		Expect(status).To(Equal(http.StatusNotFound))
	})
})
