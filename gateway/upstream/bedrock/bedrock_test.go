package bedrock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/bedrock"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// secretBackend is a backend whose credential Secret holds data (the
// secret access key under "secret").
func secretBackend(baseURL, model string, data map[string]string) upstream.Backend {
	return upstream.Backend{Name: "aws", Provider: bedrock.Name, BaseURL: baseURL, UpstreamModel: model,
		APIKey: data["secret"], Options: map[string]string{bedrock.OptionRegion: fakeupstream.BedrockRegion},
		SecretKey: func(_ context.Context, key string) (string, error) {
			if v, ok := data[key]; ok {
				return v, nil
			}
			return "", fmt.Errorf("no key %q: %w", key, credential.ErrNoKey)
		}}
}

func fakeBackend(f *fakeupstream.Server, model string) upstream.Backend {
	return secretBackend(f.URL, model, map[string]string{"secret": f.Key(), bedrock.KeyAccessKeyID: fakeupstream.BedrockAccessKeyID})
}

func readStream(g Gomega, s *upstream.Stream) string {
	var b strings.Builder
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			b.WriteString("ERROR " + err.Error())
			return b.String()
		}
		b.WriteString(ev.String())
	}
}

// TestInvoke: chat and messages clients, stream on and off, through the
// provider against the signature-checking fake: the path escapes the model
// ID as signed, and the usage is the fake's, cache reads and writes apart.
func TestInvoke(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	model := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0"
	b := fakeBackend(f, model)
	usage := fakeupstream.Usage{InputTokens: 11, OutputTokens: 5, CacheRead: fakeupstream.Int64(100), CacheWrite: fakeupstream.Int64(20)}

	f.Enqueue(fakeupstream.Reply{Text: "Hello from Bedrock", Usage: usage})
	res, err := upstream.Invoke(ctx, p, b, upstream.Request{Protocol: upstream.ChatCompletions, Model: "client-model",
		Body: []byte(`{"model":"client-model","max_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Body)).To(ContainSubstring(`"content":"Hello from Bedrock"`))
	g.Expect(string(res.Body)).To(ContainSubstring(`"model":"client-model"`))
	g.Expect(res.UsageReported).To(BeTrue())
	g.Expect(res.Usage.InputTokens).To(Equal(int64(11)))
	g.Expect(res.Usage.CacheReadTokens).To(HaveValue(Equal(int64(100))))
	g.Expect(res.Usage.CacheWriteTokens).To(HaveValue(Equal(int64(20))))
	g.Expect(res.Usage.ReportedTotalTokens).To(HaveValue(Equal(int64(136))))
	last := f.Last()
	g.Expect(last.Rejected).To(BeFalse())
	g.Expect(last.Path).To(Equal("/model/" + model + "/converse"))
	g.Expect(last.Model()).To(Equal(model))
	g.Expect(last.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeupstream.BedrockAccessKeyID + "/"))
	g.Expect(last.JSON()).To(HaveKeyWithValue("system", ConsistOf(HaveKeyWithValue("text", "be brief"))))
	g.Expect(last.JSON()).To(HaveKeyWithValue("inferenceConfig", HaveKeyWithValue("maxTokens", BeNumerically("==", 50))))

	for _, proto := range []upstream.Protocol{upstream.Messages, upstream.ChatCompletions, upstream.Responses} {
		f.Enqueue(fakeupstream.Reply{Text: "Streamed from Bedrock", Usage: usage})
		res, err = upstream.Invoke(ctx, p, b, upstream.Request{Protocol: proto, Stream: true, Model: "client-model",
			Body: []byte(`{"model":"client-model","max_tokens":50,"stream":true,"input":"hi","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`)})
		g.Expect(err).NotTo(HaveOccurred(), proto)
		wire := readStream(g, res.Stream)
		res.Close()
		g.Expect(wire).NotTo(ContainSubstring("ERROR"), proto)
		g.Expect(wire).To(ContainSubstring("Streamed "), proto)
		g.Expect(res.Stream.Complete()).To(BeTrue(), proto)
		g.Expect(res.Stream.UsageReported()).To(BeTrue(), proto)
		u := res.Stream.Usage()
		g.Expect(u.InputTokens).To(Equal(int64(11)), proto)
		g.Expect(u.OutputTokens).To(Equal(int64(5)), proto)
		g.Expect(u.CacheReadTokens).To(HaveValue(Equal(int64(100))), proto)
		g.Expect(u.CacheWriteTokens).To(HaveValue(Equal(int64(20))), proto)
		g.Expect(f.Last().Path).To(Equal("/model/" + model + "/converse-stream"))
		g.Expect(f.Last().Rejected).To(BeFalse())
	}
}

func chatRequest() upstream.Request {
	return upstream.Request{Protocol: upstream.ChatCompletions, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}
}

// TestErrors: Bedrock's exceptions as the gateway classifies them.
func TestErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := fakeBackend(f, "amazon.nova-pro-v1:0")

	for _, tc := range []struct {
		reply      fakeupstream.Reply
		status     int
		retryable  bool
		retryAfter time.Duration
		message    string
	}{
		{fakeupstream.Reply{Status: 429, RetryDelay: "7"}, 429, true, 7 * time.Second, "ThrottlingException: Too many requests"},
		{fakeupstream.Reply{Status: 503}, 503, true, 0, "ServiceUnavailableException"},
		{fakeupstream.Reply{Status: 400, ErrorType: "ServiceQuotaExceededException", ErrorMessage: "quota"}, 429, true, 0, "ServiceQuotaExceededException: quota"},
		{fakeupstream.Reply{Status: 400, ErrorMessage: "bad input"}, 400, false, 0, "ValidationException: bad input"},
		{fakeupstream.Reply{Status: 403}, 403, false, 0, "AccessDeniedException"},
	} {
		f.Enqueue(tc.reply)
		_, err := upstream.Invoke(ctx, p, b, chatRequest())
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(ue.Status).To(Equal(tc.status), tc.message)
		g.Expect(ue.Retryable).To(Equal(tc.retryable), tc.message)
		g.Expect(ue.RetryAfter).To(Equal(tc.retryAfter), tc.message)
		g.Expect(ue.Message).To(HavePrefix(tc.message))
	}

	// A wrong secret key: the fake's signature check refuses it; the
	// client sees 502 (the gateway's credential), not retried.
	bad := secretBackend(f.URL, "m", map[string]string{"secret": "wrong", bedrock.KeyAccessKeyID: fakeupstream.BedrockAccessKeyID})
	_, err := upstream.Invoke(ctx, p, bad, chatRequest())
	ue, _ := upstream.As(err)
	g.Expect(ue).NotTo(BeNil(), "%v", err)
	g.Expect(ue.Message).To(ContainSubstring("InvalidSignatureException"))
	g.Expect(ue.ClientStatus()).To(Equal(http.StatusBadGateway))
	g.Expect(f.Last().Rejected).To(BeTrue())

	// The Secret without the access key ID: this backend cannot serve,
	// another may; nothing is sent.
	n := f.Count()
	_, err = upstream.Invoke(ctx, p, secretBackend(f.URL, "m", map[string]string{"secret": f.Key()}), chatRequest())
	ue, _ = upstream.As(err)
	g.Expect(ue).NotTo(BeNil())
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.Message).To(ContainSubstring(bedrock.KeyAccessKeyID))
	g.Expect(f.Count()).To(Equal(n))

	// An exception as the stream's first frame is retried on the next
	// backend; one later ends the client's stream with an error event.
	req := chatRequest()
	req.Stream = true
	f.Enqueue(fakeupstream.Reply{ErrorEvent: true, ErrorType: "throttlingException"})
	_, err = upstream.Invoke(ctx, p, b, req)
	g.Expect(upstream.IsRetryable(err)).To(BeTrue(), "%v", err)
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(http.StatusTooManyRequests))

	f.Enqueue(fakeupstream.Reply{Text: "one two three four", ErrorEvent: true, ErrorEventAfter: 3, ErrorType: "modelStreamErrorException", ErrorMessage: "model broke"})
	res, err := upstream.Invoke(ctx, p, b, req)
	g.Expect(err).NotTo(HaveOccurred())
	wire := readStream(g, res.Stream)
	res.Close()
	g.Expect(wire).To(ContainSubstring(`"content":"two "`))
	g.Expect(wire).To(ContainSubstring("modelStreamErrorException: model broke"))
	g.Expect(res.Stream.UsageReported()).To(BeFalse(), "the usage is estimated")
}

// TestSessionToken: temporary credentials carry their session token, which
// the signature covers.
func TestSessionToken(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBedrock()
	defer f.Close()
	f.SetSessionToken("FwoGZXIvYXdzEFAKE")
	p := bedrock.New(fakeupstream.Client())
	b := fakeBackend(f, "m")
	_, err := upstream.Invoke(context.Background(), p, b, chatRequest())
	g.Expect(err).To(HaveOccurred(), "no token: refused")
	g.Expect(f.Last().Rejected).To(BeTrue())

	b = secretBackend(f.URL, "m", map[string]string{"secret": f.Key(), bedrock.KeyAccessKeyID: fakeupstream.BedrockAccessKeyID,
		bedrock.KeySessionToken: "FwoGZXIvYXdzEFAKE"})
	res, err := upstream.Invoke(context.Background(), p, b, chatRequest())
	g.Expect(err).NotTo(HaveOccurred())
	res.Close()
	g.Expect(f.Last().Header.Get("X-Amz-Security-Token")).To(Equal("FwoGZXIvYXdzEFAKE"))
}

func TestRegion(t *testing.T) {
	g := NewWithT(t)
	for base, want := range map[string]string{
		"https://bedrock-runtime.eu-west-3.amazonaws.com":                          "eu-west-3",
		"https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com":                 "us-gov-west-1",
		"https://vpce-0abc-xyz.bedrock-runtime.ap-southeast-2.vpce.amazonaws.com/": "ap-southeast-2",
	} {
		r, err := bedrock.Region(upstream.Backend{BaseURL: base})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r).To(Equal(want))
	}
	r, err := bedrock.Region(upstream.Backend{BaseURL: "http://127.0.0.1:1", Options: map[string]string{bedrock.OptionRegion: "us-west-2"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(Equal("us-west-2"))
	_, err = bedrock.Region(upstream.Backend{Name: "x", BaseURL: "http://127.0.0.1:1"})
	var ue *upstream.Error
	g.Expect(errors.As(err, &ue)).To(BeTrue())
	g.Expect(ue.Message).To(ContainSubstring("options.region"))

	u, err := bedrock.URL(upstream.Backend{BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com/", UpstreamModel: "anthropic.claude-3-haiku-20240307-v1:0"}, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.String()).To(Equal("https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"))
}
