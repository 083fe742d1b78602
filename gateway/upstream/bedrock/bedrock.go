// Package bedrock is the provider for Amazon Bedrock's Converse API
// (Converse and ConverseStream): clients' requests are translated to it, its
// answers back (see translate's bedrock codec and docs/providers.md).
// Requests are signed with AWS Signature Version 4 by the AWS SDK's signer;
// ConverseStream's AWS event stream frames are read by the SDK's decoder
// and handed on as server-sent events.
package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

// Name is the provider's registered name.
const Name = "bedrock"

// Backend options.
const (
	// OptionRegion is the AWS region the requests are signed for; without
	// it the region is read from the base URL's host
	// (bedrock-runtime.{region}.amazonaws.com).
	OptionRegion = "region"
)

// The keys of a backend's credential Secret. credentialSecretRef.key
// names the secret access key; the access key ID, and a session token for
// temporary credentials, are read from the same Secret under these keys
// (the names of the AWS environment variables).
const (
	KeyAccessKeyID  = "AWS_ACCESS_KEY_ID"
	KeySessionToken = "AWS_SESSION_TOKEN"
)

// SigningName is the service name Bedrock's runtime endpoints sign with.
const SigningName = "bedrock"

// maxErrorBody bounds an error body read to classify it.
const maxErrorBody = 64 << 10

// Provider sends Converse and ConverseStream requests.
type Provider struct {
	client   *http.Client
	identity *webIdentity
	now      func() time.Time
}

// New returns a provider using client (nil: upstream.ClientOr).
func New(client *http.Client) *Provider {
	c := upstream.ClientOr(client)
	return &Provider{client: c, identity: newWebIdentity(c), now: time.Now}
}

// Protocols implements upstream.TextProvider.
func (*Provider) Protocols() []upstream.Protocol {
	return []upstream.Protocol{upstream.Bedrock}
}

// Send implements upstream.TextProvider: it signs the Converse call for
// the backend's region with its credential and, for a stream, turns the
// event stream into server-sent events. Error answers are normalised so
// that the gateway classifies them (see classify).
func (p *Provider) Send(ctx context.Context, b upstream.Backend, _ upstream.Protocol, body []byte, stream bool, _ http.Header) (*http.Response, error) {
	method, accept := "/converse", "application/json"
	if stream {
		method, accept = "/converse-stream", "application/vnd.amazon.eventstream"
	}
	resp, err := p.post(ctx, b, method, body, accept)
	if err != nil || resp.StatusCode >= 300 {
		return resp, err
	}
	if stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.amazon.eventstream") {
		resp.Body = newEventBody(resp.Body)
		resp.Header.Set("Content-Type", "text/event-stream")
	}
	return resp, nil
}

// CountTokens implements upstream.TokenCounter with the CountTokens API
// (POST /model/{modelId}/count-tokens), signed as Send signs: the messages
// body translated to a Converse request, of which the messages, the system
// blocks and the tool configuration go in input.converse (what
// ConverseTokensRequest takes). The answer's inputTokens is the count.
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, _ http.Header) (int64, error) {
	cb, _, err := translate.TranslateRequest(upstream.Messages, upstream.Bedrock, body, b.UpstreamModel)
	if err != nil {
		return 0, upstream.RequestError(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cb, &m); err != nil {
		return 0, upstream.RequestError(err)
	}
	converse := map[string]json.RawMessage{}
	for _, k := range []string{"messages", "system", "toolConfig"} {
		if v, ok := m[k]; ok {
			converse[k] = v
		}
	}
	in, err := json.Marshal(map[string]any{"input": map[string]any{"converse": converse}})
	if err != nil {
		return 0, upstream.RequestError(err)
	}
	resp, err := p.post(ctx, b, "/count-tokens", in, "application/json")
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, upstream.Bedrock, "inputTokens")
}

// post signs a POST of body to the backend model's method for the
// backend's region with its credential and sends it. An error answer is
// normalised so that the gateway classifies it (see classify).
func (p *Provider) post(ctx context.Context, b upstream.Backend, method string, body []byte, accept string) (*http.Response, error) {
	region, err := Region(b)
	if err != nil {
		return nil, err
	}
	creds, err := p.credentials(ctx, b, region)
	if err != nil {
		return nil, err
	}
	u, err := methodURL(b, method)
	if err != nil {
		return nil, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Message: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	sum := sha256.Sum256(body)
	// A signer per request: the SDK's signer caches the derived signing
	// key by access key ID alone, so a shared one would keep signing with
	// an old secret after a Secret's rotation (or another backend's).
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningName, region, p.now().UTC()); err != nil {
		return nil, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Message: "signing the bedrock request failed", Err: err}
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		classify(resp)
	}
	return resp, nil
}

// URL is the Converse (or ConverseStream) URL of backend b:
// {base}/model/{modelId}/converse[-stream].
func URL(b upstream.Backend, stream bool) (*url.URL, error) {
	if stream {
		return methodURL(b, "/converse-stream")
	}
	return methodURL(b, "/converse")
}

// methodURL is {base}/model/{modelId}{method} of backend b. The model ID
// (a model, an inference profile or an ARN) is one path segment, every
// reserved character escaped as the AWS SDK escapes it, so that the path
// signed is the path sent.
func methodURL(b upstream.Backend, method string) (*url.URL, error) {
	base := strings.TrimRight(b.BaseURL, "/")
	if base == "" {
		region, err := Region(b)
		if err != nil {
			return nil, err
		}
		base = "https://bedrock-runtime." + region + ".amazonaws.com"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("backend %q has no usable bedrock baseURL", b.Name)
	}
	if b.UpstreamModel == "" {
		return nil, fmt.Errorf("backend %q names no bedrock model", b.Name)
	}
	// The path signed is the path sent: RawPath keeps the escaped label.
	basePath := strings.TrimRight(u.EscapedPath(), "/")
	u.Path = strings.TrimRight(u.Path, "/") + "/model/" + b.UpstreamModel + method
	u.RawPath = basePath + "/model/" + escapeLabel(b.UpstreamModel) + method
	return u, nil
}

// escapeLabel escapes a path label as the AWS SDK does (httpbinding): all
// but the unreserved characters, '/' included.
func escapeLabel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// Region is the region backend b signs for: the region option, else the
// label after bedrock-runtime (or bedrock-runtime-fips) in the base URL's
// host, which also covers VPC endpoint names
// (vpce-….bedrock-runtime.{region}.vpce.amazonaws.com).
func Region(b upstream.Backend) (string, error) {
	if r := strings.TrimSpace(b.Options[OptionRegion]); r != "" {
		return r, nil
	}
	if u, err := url.Parse(b.BaseURL); err == nil {
		labels := strings.Split(u.Hostname(), ".")
		for i := 0; i+1 < len(labels); i++ {
			if labels[i] == "bedrock-runtime" || labels[i] == "bedrock-runtime-fips" {
				return labels[i+1], nil
			}
		}
	}
	return "", &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway,
		Message: fmt.Sprintf("backend %q (bedrock) has no region: set options.region or a https://bedrock-runtime.{region}.amazonaws.com baseURL", b.Name)}
}

// credentials are the backend's AWS credentials: the access key from its
// Secret, else the pod's web identity.
func (p *Provider) credentials(ctx context.Context, b upstream.Backend, region string) (aws.Credentials, error) {
	if b.APIKey == "" {
		return p.identity.retrieve(ctx, b, region)
	}
	if b.SecretKey == nil {
		return aws.Credentials{}, credentialError(b, "has no "+KeyAccessKeyID+" beside the secret key", nil)
	}
	id, err := b.SecretKey(ctx, KeyAccessKeyID)
	if err != nil {
		return aws.Credentials{}, credentialError(b, "has no key "+KeyAccessKeyID, err)
	}
	token, err := b.SecretKey(ctx, KeySessionToken)
	if err != nil && !errors.Is(err, credential.ErrNoKey) {
		return aws.Credentials{}, credentialError(b, "could not be read", err)
	}
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: b.APIKey, SessionToken: token, Source: "Secret"}, nil
}

// credentialError is a backend whose credential is unusable: another
// backend may serve.
func credentialError(b upstream.Backend, what string, err error) *upstream.Error {
	return &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
		Message: fmt.Sprintf("the credential Secret of backend %q %s", b.Name, what)}
}

// classify normalises an error answer. Bedrock names the exception in the
// x-amzn-ErrorType header ("ThrottlingException:http://…") and puts
// {"message"} (or {"Message"}) in the body; the body is rewritten as
// {"message":"<Exception>: <message>","type":…} so that the client sees
// which one it was. ServiceQuotaExceededException (HTTP 400) is a quota
// of this backend's account, not a fault of the request: it becomes 429 so
// that the next backend is tried. Retry-After, when Bedrock sends it, is
// kept.
func classify(resp *http.Response) {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	exc := ExceptionName(resp.Header.Get("X-Amzn-Errortype"), raw)
	var m struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(raw, &m)
	msg := m.Message
	if msg == "" {
		msg = m.MessageU
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	if exc != "" {
		msg = exc + ": " + msg
	}
	if exc == "ServiceQuotaExceededException" {
		resp.StatusCode, resp.Status = http.StatusTooManyRequests, "429 Too Many Requests"
	}
	out, _ := json.Marshal(map[string]any{"message": msg, "type": exc})
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
}

// ExceptionName is the exception of an error answer: the x-amzn-ErrorType
// header up to its first ':', else the body's __type (after a '#').
func ExceptionName(header string, body []byte) string {
	if h, _, _ := strings.Cut(header, ":"); h != "" {
		return strings.TrimSpace(h)
	}
	var v struct {
		Type string `json:"__type"`
	}
	if json.Unmarshal(body, &v) == nil && v.Type != "" {
		if _, after, ok := strings.Cut(v.Type, "#"); ok {
			return after
		}
		return v.Type
	}
	return ""
}

var (
	_ upstream.TextProvider = (*Provider)(nil)
	_ upstream.TokenCounter = (*Provider)(nil)
)
