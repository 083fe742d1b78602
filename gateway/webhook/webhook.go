// Package webhook signs and sends task webhooks in the Standard Webhooks
// style (https://www.standardwebhooks.com), the scheme OpenAI's
// webhooks also use:
//
//	webhook-id:        the event ID, the same on every retry
//	webhook-timestamp: Unix seconds of this attempt
//	webhook-signature: "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body))
//
// The key is the base64 part of a "whsec_…" secret, or the secret's bytes
// when it has no such prefix.
package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/platform/netguard"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// MinSecretBytes is the shortest signing key accepted.
const MinSecretBytes = 16

// secretPrefix marks a base64-encoded Standard Webhooks secret.
const secretPrefix = "whsec_"

// Key returns the HMAC key of a signing secret.
func Key(secret string) ([]byte, error) {
	secret = strings.TrimSpace(secret)
	key := []byte(secret)
	if b64, ok := strings.CutPrefix(secret, secretPrefix); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, fmt.Errorf("webhook secret: the part after %q is not base64", secretPrefix)
		}
	}
	if len(key) < MinSecretBytes {
		return nil, fmt.Errorf("webhook secret: at least %d bytes are required", MinSecretBytes)
	}
	return key, nil
}

// Sign returns the webhook-signature value of one attempt, computed by
// the specification's reference library.
func Sign(key []byte, id string, ts time.Time, body []byte) (string, error) {
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return "", err
	}
	return wh.Sign(id, ts, body)
}

// Retry schedule: the wait after attempt n (1-based) is backoff[n-1] with
// ±20% jitter; later attempts reuse the last step.
var backoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute}

// RetryAfter is the wait before the attempt that follows attempt n.
func RetryAfter(n int32) time.Duration {
	step := backoff[min(max(int(n), 1), len(backoff))-1]
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(step))
	return step + jitter
}

// Sender posts events to URLs a tenant chose. NewSender makes one whose
// client has a 10 s timeout, does not follow redirects (a redirect is not an
// acknowledgement) and dials only what the guard allows (public addresses
// and the process's allow-list); the zero value does the same for public
// addresses only, on a client made per attempt.
type Sender struct {
	// Client sends the attempts as is when set (tests); nil: a guarded one.
	Client *http.Client
	// Guard decides which receiver addresses are refused before signing,
	// when set or when Client is nil (then public ones only).
	Guard     *netguard.Guard
	UserAgent string
}

// NewSender returns a Sender whose one client dials what guard allows.
func NewSender(guard *netguard.Guard, userAgent string) Sender {
	return Sender{Client: guarded(guard), Guard: guard, UserAgent: userAgent}
}

func guarded(g *netguard.Guard) *http.Client {
	return g.Client(netguard.ClientOptions{Timeout: 10 * time.Second})
}

// Result is the outcome of one attempt.
type Result struct {
	// StatusCode is the receiver's HTTP status; 0 when none was received.
	StatusCode int
	// Err is set unless the receiver answered 2xx. It never contains the
	// signing secret.
	Err error
	// Forbidden is set when the receiver's address is not allowed: no
	// request was sent, and retrying cannot help.
	Forbidden bool
}

// Send makes one signed delivery attempt at now.
func (s *Sender) Send(ctx context.Context, url string, key []byte, id string, body []byte, now time.Time) Result {
	if s.Client == nil || s.Guard != nil { // a guarded client: refuse what it would refuse, before signing
		if _, err := s.Guard.CheckURL(url); err != nil {
			return Result{Err: errForbidden, Forbidden: true}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: fmt.Errorf("webhook request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	sig, err := Sign(key, id, now, body)
	if err != nil {
		return Result{Err: fmt.Errorf("webhook signature: %w", err)}
	}
	req.Header.Set(HeaderSignature, sig)
	if s.UserAgent != "" {
		req.Header.Set("User-Agent", s.UserAgent)
	}
	resp, err := s.client().Do(req)
	if errors.Is(err, netguard.ErrForbidden) {
		return Result{Err: errForbidden, Forbidden: true}
	}
	if err != nil {
		return Result{Err: describe(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection reusable
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{StatusCode: resp.StatusCode, Err: fmt.Errorf("webhook receiver answered HTTP %d", resp.StatusCode)}
	}
	return Result{StatusCode: resp.StatusCode}
}

func (s *Sender) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return guarded(s.Guard)
}

// errForbidden says why nothing was sent, without the address.
var errForbidden = errors.New("webhook receiver address not allowed: not a public internet address")

// describe turns a transport error into a short reason without the
// receiver's address (status fields and logs carry no IPs).
func describe(err error) error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errors.New("webhook receiver did not answer in time")
	case errors.As(err, &oe) && oe.Op == "dial":
		return errors.New("webhook receiver could not be reached")
	default:
		return errors.New("webhook request failed before an answer")
	}
}
