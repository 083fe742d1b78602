package handlers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/framework"
)

// One status → error-type table per protocol family (apierr, and
// docs/api-choices.md "Error types by status"): the gateway's own errors and
// the errors it relays from upstreams get their type from it alike.
var _ = Describe("error types on the text endpoints", Ordered, func() {
	var (
		acct                *framework.Account
		unserved, upstreamd string
	)

	BeforeAll(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To(int64(5 * billing.QuotaPerUSD))})
		Expect(err).NotTo(HaveOccurred())
		// Served only to a group the key is not in: the gateway itself
		// answers 503 no_available_backend.
		unserved = pricedTextRoute("errors-unserved", "simulated", "elsewhere")
		upstreamd = pricedTextRoute("errors-upstream", "simulated", "default")
	})

	// The three endpoints and the type each family's table gives a 5xx other
	// than 504 and 529.
	endpoints := []struct {
		path, body, server5xx string
	}{
		{"/v1/messages", `{"model":%q,"max_tokens":64%s,"messages":[{"role":"user","content":%q}]}`, "api_error"},
		{"/v1/chat/completions", `{"model":%q%s,"messages":[{"role":"user","content":%q}]}`, "server_error"},
		{"/v1/responses", `{"model":%q%s,"input":%q}`, "server_error"},
	}

	post := func(path, body string) (int, []byte) {
		GinkgoHelper()
		req, err := http.NewRequest("POST", stack.BaseURL+path, strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, raw
	}

	// errorType reads error.type of a JSON error body.
	errorType := func(raw []byte) string {
		GinkgoHelper()
		var body struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		Expect(json.Unmarshal(raw, &body)).To(Succeed(), "body: %s", raw)
		Expect(body.Error.Type).NotTo(BeEmpty(), "body: %s", raw)
		return body.Error.Type
	}

	// streamErrorType reads error.type of a stream's error event.
	streamErrorType := func(raw []byte) string {
		GinkgoHelper()
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(data, []byte(`"error"`)) {
				last = append([]byte(nil), data...)
			}
		}
		Expect(last).NotTo(BeNil(), "no error event in the stream: %s", raw)
		return errorType(last)
	}

	It("gives the gateway's own 503 and an upstream's 503 or 504 the same error type", func() {
		for _, e := range endpoints {
			By(e.path)
			status, raw := post(e.path, fmt.Sprintf(e.body, unserved, "", "hello"))
			Expect(status).To(Equal(http.StatusServiceUnavailable), "body: %s", raw)
			own := errorType(raw)
			Expect(own).To(Equal(e.server5xx))

			// An upstream's 503 or 504 is retried; when no backend is left
			// the client gets 502 upstream_unavailable, of the same type.
			for _, fail := range []string{"503", "504"} {
				status, raw = post(e.path, fmt.Sprintf(e.body, upstreamd, "", "[sim:fail="+fail+"] hello"))
				Expect(status).To(Equal(http.StatusBadGateway), "upstream %s, body: %s", fail, raw)
				Expect(errorType(raw)).To(Equal(own), "upstream %s", fail)
			}
		}
	})

	It("gives an answer whose usage row is not durable the same error type in JSON and in a stream", func() {
		restore := usage.refuse(upstreamd)
		defer restore()
		for _, e := range endpoints {
			By(e.path)
			status, raw := post(e.path, fmt.Sprintf(e.body, upstreamd, "", "hello"))
			Expect(status).To(Equal(http.StatusServiceUnavailable), "body: %s", raw)
			Expect(errorType(raw)).To(Equal(e.server5xx))

			status, raw = post(e.path, fmt.Sprintf(e.body, upstreamd, `,"stream":true`, "hello"))
			Expect(status).To(Equal(http.StatusOK), "the stream had begun: %s", raw)
			Expect(streamErrorType(raw)).To(Equal(e.server5xx), "stream: %s", raw)
		}
	})
})
