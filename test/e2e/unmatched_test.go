package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

var _ = Describe("Unknown paths and methods", func() {
	// Unknown paths and methods answer JSON in the shape of the family the path
	// belongs to, so that clients parse them like any other error.
	It("unknown paths and methods answer the family shape", func() {
		t := GinkgoTB()
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		for _, c := range []struct {
			method, path string
			status       int
			allow        string
			shape        func(g Gomega, body map[string]any)
		}{
			{"GET", "/v1/messages", 405, "POST", anthropicShape("invalid_request_error")},
			{"POST", "/v1/messages/nope", 404, "", anthropicShape("not_found_error")},
			{"GET", "/v1/chat/completions", 405, "POST", openAIShape("invalid_request_error")},
			{"POST", "/v1/responses/x/y", 404, "", openAIShape("not_found_error")},
			{"DELETE", "/v1/models", 405, "GET, HEAD", openAIShape("invalid_request_error")},
			{"GET", "/api/usage/nope", 404, "", func(g Gomega, body map[string]any) {
				g.Expect(body).To(HaveKeyWithValue("success", false))
				g.Expect(body["error"]).To(HaveKeyWithValue("code", "not_found"))
			}},
			{"GET", "/v1/tokens", 405, "POST", func(g Gomega, body map[string]any) {
				g.Expect(body).To(HaveKeyWithValue("success", false))
				g.Expect(body["message"]).To(ContainSubstring("POST"))
			}},
			{"GET", "/v1/nothing-here", 404, "", commonShape("not_found_error")},
			{"PUT", "/v1/videos/generations", 405, "GET, HEAD, POST", commonShape("invalid_request_error")},
		} {
			By(c.method + " " + c.path)
			func() {
				g := NewWithT(t)
				req, _ := http.NewRequest(c.method, stack.BaseURL+c.path, strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+acct.Key)
				resp, err := http.DefaultClient.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				g.Expect(resp.StatusCode).To(Equal(c.status), string(raw))
				g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"))
				g.Expect(resp.Header.Get("Allow")).To(Equal(c.allow))
				var body map[string]any
				g.Expect(json.Unmarshal(raw, &body)).To(Succeed(), string(raw))
				c.shape(g, body)
			}()
		}

		By("the SDKs read them as API errors")
		func() {
			g := NewWithT(t)
			ctx := context.Background()
			ac := anthropicClient(acct.Key)
			err := ac.Get(ctx, "v1/messages", nil, nil)
			var aerr *anthropic.Error
			g.Expect(errors.As(err, &aerr)).To(BeTrue(), "%v", err)
			g.Expect(aerr.StatusCode).To(Equal(405))
			g.Expect(aerr.Type()).To(BeEquivalentTo("invalid_request_error"))

			oc := openaiClient(acct.Key)
			_, err = oc.Models.Get(ctx, "a/b/c")
			var oerr *openai.Error
			g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
			g.Expect(oerr.StatusCode).To(Equal(404))
			g.Expect(oerr.Type).To(Equal("not_found_error"))
		}()
	})
})

func anthropicShape(typ string) func(Gomega, map[string]any) {
	return func(g Gomega, body map[string]any) {
		g.Expect(body).To(HaveKeyWithValue("type", "error"))
		g.Expect(body["error"]).To(HaveKeyWithValue("type", typ))
		g.Expect(body["error"]).To(HaveKey("message"))
	}
}

func openAIShape(typ string) func(Gomega, map[string]any) {
	return func(g Gomega, body map[string]any) {
		g.Expect(body["error"]).To(HaveKeyWithValue("type", typ))
		g.Expect(body["error"]).To(HaveKey("message"))
		g.Expect(body["error"]).To(HaveKey("code"))
	}
}

func commonShape(typ string) func(Gomega, map[string]any) {
	return func(g Gomega, body map[string]any) {
		g.Expect(body["error"]).To(HaveKeyWithValue("type", typ))
		g.Expect(body["error"]).To(HaveKey("code"))
		g.Expect(body["error"].(map[string]any)["code"]).To(BeNumerically(">=", 404))
	}
}
