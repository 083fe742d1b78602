package handlers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

func TestOffStackRaisesTheCallsPanicOnTheCaller(t *testing.T) {
	g := NewWithT(t)
	ran := false
	offStack(func() { ran = true })
	g.Expect(ran).To(BeTrue())

	for _, want := range []any{http.ErrAbortHandler, errors.New("boom"), "a string"} {
		g.Expect(func() { offStack(func() { panic(want) }) }).To(PanicWith(want))
	}
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge), as an h2c proxy in
// front of the gateway does.
func h2cClient() *http.Client {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

func (f *textFixture) h2cServer(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(f.mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func postH2C(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-good")
	req.Header.Set("Content-Type", "application/json")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Over HTTP/2 admission and the upstream call run on a goroutine of their
// own (offStack); the answer, the stream and the bill are what HTTP/1.1 gets.
func TestTextOverHTTP2(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	srv := f.h2cServer(t)

	resp, body := postH2C(t, srv.URL, strings.Replace(chatBody, `"max_tokens"`, `"stream":true,"stream_options":{"include_usage":true},"max_tokens"`, 1))
	g.Expect(resp.ProtoMajor).To(Equal(2))
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"))
	g.Expect(body).To(ContainSubstring(`"usage":`))
	g.Expect(strings.TrimSpace(body)).To(HaveSuffix("data: [DONE]"))
	g.Expect(f.sink.rows).To(HaveLen(1))
	streamed := f.sink.rows[0]
	g.Expect(streamed.CompletionTokens).To(BeNumerically(">", 0))
	g.Expect(streamed.RequestID).To(Equal(resp.Header.Get("x-request-id")))
	g.Expect(f.leaser.settled).To(Equal([]billing.Quota{streamed.Quota}))

	resp, body = postH2C(t, srv.URL, chatBody)
	g.Expect(resp.ProtoMajor).To(Equal(2))
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(`"choices"`))
	g.Expect(f.sink.rows).To(HaveLen(2))

	f.leaser.balance = 1
	resp, body = postH2C(t, srv.URL, chatBody)
	g.Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests), "a refusal written off the handler's goroutine")
	g.Expect(body).To(ContainSubstring(`"insufficient_quota"`))
	g.Expect(f.sink.rows).To(HaveLen(2), "nothing billed")
}
