// Package handlers implements the gateway's HTTP endpoints, one file per
// endpoint group of the contract. Handlers read Kubernetes objects only from
// the informer cache and write only what the API creates (ApiTokens,
// GenerationTasks).
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/http/openapi"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

// TextDeps are what the text endpoints (messages, chat completions,
// responses) use.
type TextDeps struct {
	Clock clock.PassiveClock
	// Admitter routes, rate-limits, prices and reserves a request.
	Admitter *admission.Admitter
	// Breaker records each backend attempt's outcome; the router skips the
	// backends whose circuit it opened.
	Breaker Breaker
	// Limiter is charged the tokens an answer used.
	Limiter Limits
	// Leaser reserves and settles quota from this replica's leases.
	Leaser QuotaLeaser
	// UsageLog makes usage rows durable by group commit.
	UsageLog UsageSink
	// Prices returns the current price table (rebuilt on PriceRule changes).
	Prices func() *pricing.Table
	// Upstreams are the compiled-in adapters (builtin.Registry, built once
	// per process by the composition root).
	Upstreams *upstream.Registry
	// Credentials reads an upstream credential (a Secret key of a route's
	// namespace).
	Credentials credential.Source
	// Ledger stores the responses' conversation state.
	Ledger Ledger
}

// CountTokensDeps are what the count-tokens endpoint uses: it admits and
// routes like the messages endpoint but neither reserves nor bills.
type CountTokensDeps struct {
	Clock       clock.PassiveClock
	Admitter    *admission.Admitter
	Breaker     Breaker
	Upstreams   *upstream.Registry
	Credentials credential.Source
}

// EmbeddingsDeps are what the embeddings endpoint uses.
type EmbeddingsDeps struct {
	Clock    clock.PassiveClock
	Admitter *admission.Admitter
	Breaker  Breaker
	// Limiter is charged the input tokens a settled request used.
	Limiter     Limits
	Leaser      QuotaLeaser
	UsageLog    UsageSink
	Prices      func() *pricing.Table
	Upstreams   *upstream.Registry
	Credentials credential.Source
}

// MediaDeps are what the image and video task endpoints use.
type MediaDeps struct {
	// Cache reads Kubernetes objects from the informer cache.
	Cache client.Reader
	// Writer creates GenerationTasks on the API server.
	Writer client.Writer
	// API reads from the API server, past the cache: a task created a
	// moment ago is answered before the cache or the archive has it (nil:
	// the cache and the archive only).
	API    client.Reader
	Ledger Ledger
	Clock  clock.PassiveClock
	Router Routes
	// Admitter admits the submissions.
	Admitter *admission.Admitter
	// Blobs stores uploads and generated assets.
	Blobs *blob.Store
	// SubmitWait bounds how long an image or video submission waits for
	// the first upstream submission's outcome (a synchronous policy refusal
	// answers 422); 0 means DefaultSubmitWait, negative does not wait.
	SubmitWait time.Duration
	// ImageProbe checks remote reference images of the multi-image family;
	// nil skips those remote checks.
	ImageProbe media.ImageProbe
}

// PriceSelector selects a model's price rule from the current table,
// looking once more in a freshly rebuilt one when the current table has
// none: the informer's event that marks the table stale can trail the
// cache update that published the price. The composition root builds the
// Admitter with its Select.
type PriceSelector struct {
	// Prices returns the current price table.
	Prices func() *pricing.Table
	// Recheck, when set, rebuilds the table from the cache now
	// (rate-limited) and returns it.
	Recheck func() *pricing.Table
}

// Select is an admission.Prices.
func (s PriceSelector) Select(namespace, model, group string, f pricing.Facts) (*pricing.Rule, error) {
	rule, err := s.Prices().Select(namespace, model, group, f)
	if errors.Is(err, pricing.ErrNoPrice) && s.Recheck != nil {
		rule, err = s.Recheck().Select(namespace, model, group, f)
	}
	return rule, err
}

// UsageSink takes usage rows (the gateway's is the usagelog.Writer).
// Submit queues a row; the answer's final bytes wait for its Durable.
type UsageSink interface {
	Submit(ctx context.Context, row store.UsageRow) (Durable, error)
}

// Durable tells when a submitted usage row is durable.
type Durable interface {
	// Wait returns nil once the row is in the ledger or fsynced to the
	// spool; an error when it could not be stored or ctx ended.
	Wait(ctx context.Context) error
}

// Mux is where handlers are mounted (http.ServeMux or the gateway server).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Handlers are the endpoint groups Register mounts, each holding only what
// it reads; the composition root (gateway/wire) builds them.
type Handlers struct {
	// Auth resolves the API keys of every authenticated endpoint.
	Auth        Authenticator
	Tokens      *Tokens
	Balance     *Balance
	Models      *Models
	Pricing     *Pricing
	Usage       *Usage
	Responses   *StoredResponses
	Uploads     *Uploads
	Text        *TextDeps
	CountTokens *CountTokensDeps
	Embeddings  *EmbeddingsDeps
	Media       *MediaDeps
	Files       *Files
	Batches     *Batches
}

// Register mounts every endpoint group.
func Register(mux Mux, h Handlers) {
	keys := h.Auth
	mux.Handle("POST /v1/tokens", authenticated(keys, false, simpleFail, h.Tokens.Create))

	for _, p := range []string{"/v1/user/balance", "/user/balance"} {
		mux.Handle("GET "+p, cors(authenticated(keys, false, simpleFail, h.Balance.User)))
		mux.Handle("OPTIONS "+p, cors(http.HandlerFunc(noContent)))
	}
	mux.Handle("GET /v1/balance", authenticated(keys, false, simpleFail, h.Balance.Token))

	for _, t := range []*Text{{h.Text, messagesProtocol()}, {h.Text, chatProtocol()}, {h.Text, responsesProtocol()}} {
		mux.Handle("POST "+t.p.path, instrument(string(t.p.endpoint), telemetry.OperationChat, textIDHeaders,
			authenticated(keys, t.p.allowXAPIKey, t.authFail, t.serveHTTP)))
	}
	count := newCountTokens(h.CountTokens)
	mux.Handle("POST "+countTokensPath, instrument(countTokensEndpoint, telemetry.OperationCountTokens, textIDHeaders,
		authenticated(keys, true, count.authFail, count.serveHTTP)))

	emb := newEmbeddings(h.Embeddings)
	mux.Handle("POST "+embeddingsPath, instrument(string(v1.EndpointEmbeddings), telemetry.OperationEmbeddings, textIDHeaders,
		authenticated(keys, false, emb.authFail, emb.serveHTTP)))

	models := h.Models
	// x-api-key too: Anthropic's SDKs and Claude Code list models with it.
	mux.Handle("GET /v1/models", authenticated(keys, true, models.authFail, models.List))
	mux.Handle("GET /v1/models/{id...}", authenticated(keys, true, models.authFail, models.Get))
	mux.Handle("GET /v1/pricing", authenticated(keys, false, pricingAuthFail, h.Pricing.Catalog))

	mux.Handle("GET /api/usage/tokens/requests", http.HandlerFunc(h.Usage.Requests))
	mux.Handle("GET /api/usage/tokens/summary", http.HandlerFunc(h.Usage.Summary))

	registerResponses(mux, keys, h.Responses)

	registerMedia(mux, keys, h.Media)

	registerUploads(mux, keys, h.Uploads)

	registerFiles(mux, keys, h.Files)
	registerBatches(mux, keys, h.Batches)

	mux.Handle("GET "+openapi.Path, openapi.Handler())
}

// writeJSON writes a 200 (or status) JSON body.
func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func noContent(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// textIDHeaders carry a text request's ID: Anthropic's request-id and the
// common x-request-id.
var textIDHeaders = []string{"request-id", "x-request-id"}

// simpleFail answers an authentication failure as {success:false, message}
// (balance, tokens, uploads).
func simpleFail(w http.ResponseWriter, status int, message string) { apierr.Simple(w, status, message) }

// storedDuration reads a stored audio or video file's duration from its
// container headers (the upload check and the submission's 15-second
// totals both use it).
func storedDuration(ctx context.Context, blobs *blob.Store, key string) (time.Duration, error) {
	rd, err := blobs.Open(ctx, key)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rd.Close() }()
	return mediaduration.Of(rd, rd.Size(), rd.ContentType())
}
