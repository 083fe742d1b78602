package handlers

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

const (
	embeddingsPath = "/v1/embeddings"
	// maxEmbeddingInputs is OpenAI's limit of inputs per request.
	maxEmbeddingInputs = 2048
)

// embedRequest is what the gateway reads of an embeddings body.
type embedRequest struct {
	Model string
	// Texts are the string inputs (nil for token arrays).
	Texts []string
	// Tokens counts the tokens of token-array input (0 for strings).
	Tokens     int64
	Dimensions int
	Base64     bool
}

// parseEmbeddings reads and checks an embeddings body as OpenAI's API does:
// a model, an input that is a non-empty string, an array of 1 to 2 048
// non-empty strings, a token array or an array of token arrays, an
// encoding_format of float or base64, and dimensions of at least 1. A
// non-empty message is a 400.
func parseEmbeddings(body []byte) (embedRequest, string) {
	var r embedRequest
	if _, msg := decodeObject(body); msg != "" {
		return r, msg
	}
	var raw struct {
		Model          json.RawMessage `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat json.RawMessage `json:"encoding_format"`
		Dimensions     json.RawMessage `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return r, "the request body is not valid JSON: " + err.Error()
	}
	if json.Unmarshal(raw.Model, &r.Model) != nil || r.Model == "" {
		return r, "you must provide a model parameter (a string)"
	}
	if msg := r.parseInput(raw.Input); msg != "" {
		return r, msg
	}
	if isSet(raw.EncodingFormat) {
		var ef string
		if json.Unmarshal(raw.EncodingFormat, &ef) != nil || (ef != "float" && ef != "base64") {
			return r, "encoding_format must be \"float\" or \"base64\""
		}
		r.Base64 = ef == "base64"
	}
	if isSet(raw.Dimensions) {
		var d int64
		if json.Unmarshal(raw.Dimensions, &d) != nil || d < 1 || d > math.MaxInt32 {
			return r, "dimensions must be an integer of at least 1"
		}
		r.Dimensions = int(d)
	}
	return r, ""
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

const invalidInput = "input must be a non-empty string, an array of 1 to 2048 non-empty strings, an array of tokens or an array of token arrays"

func (r *embedRequest) parseInput(raw json.RawMessage) string {
	if !isSet(raw) {
		return "you must provide an input parameter"
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return invalidInput
		}
		r.Texts = []string{one}
		return ""
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		if len(many) == 0 || len(many) > maxEmbeddingInputs {
			return invalidInput
		}
		for _, s := range many {
			if s == "" {
				return invalidInput
			}
		}
		r.Texts = many
		return ""
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil {
		if len(tokens) == 0 {
			return invalidInput
		}
		r.Tokens = int64(len(tokens))
		return ""
	}
	var arrays [][]int64
	if json.Unmarshal(raw, &arrays) == nil {
		if len(arrays) == 0 || len(arrays) > maxEmbeddingInputs {
			return invalidInput
		}
		for _, a := range arrays {
			if len(a) == 0 {
				return invalidInput
			}
			r.Tokens += int64(len(a))
		}
		return ""
	}
	return invalidInput
}

// estimateTokens is the count billed when the upstream reports none: a
// token array's own length, else the strings' bytes by the text estimate
// (pricing.EstimateInputTokens), which the reservation covers.
func (r *embedRequest) estimateTokens() int64 {
	if r.Texts == nil {
		return r.Tokens
	}
	var n int64
	for _, t := range r.Texts {
		n += int64(len(t))
	}
	return pricing.EstimateInputTokens(n)
}

// Embeddings serves POST /v1/embeddings: authenticate, validate, admit
// (reserving the input's estimate), call the route's upstreams with
// failover, settle with the upstream's token count and answer in OpenAI's
// format once the usage row is durable. It shares the chat protocol's
// error shapes and settlement.
type Embeddings struct {
	t *Text
}

// newEmbeddings runs the embeddings endpoint on the chat completions
// pipeline (its error shape, refusals, retries and settlement) with only
// what embeddings use.
func newEmbeddings(d *EmbeddingsDeps) *Embeddings {
	return &Embeddings{t: &Text{&TextDeps{Clock: d.Clock, Admitter: d.Admitter, Breaker: d.Breaker, Limiter: d.Limiter, Leaser: d.Leaser,
		UsageLog: d.UsageLog, Prices: d.Prices, Upstreams: d.Upstreams, Credentials: d.Credentials}, chatProtocol()}}
}

func (e *Embeddings) authFail(w http.ResponseWriter, status int, message string) {
	e.t.authFail(w, status, message)
}

func (e *Embeddings) serveHTTP(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t := e.t
	ctx := r.Context()
	info := infoOf(ctx)
	body, ok := t.readBody(w, r, "request_too_large")
	if !ok {
		return
	}
	req, msg := parseEmbeddings(body)
	if msg != "" {
		t.p.fail(w, http.StatusBadRequest, "", msg)
		return
	}
	requestParsed(info.span, p, req.Model, 0, false)
	ad, refused := t.Admitter.Admit(ctx, admission.Request{
		Principal: p, RequestID: info.id, Model: req.Model,
		Family: v1.ModelTypeEmbedding, Endpoint: v1.EndpointEmbeddings, CountsTokens: true,
		Subject:  embedSubject{bodyLen: int64(len(body))},
		Reserver: t.Leaser,
	})
	if refused != nil {
		e.refuse(w, refused)
		return
	}
	info.model = req.Model
	requestRouted(info.span, telemetry.OperationEmbeddings, req.Model)
	c := &textCall{ctx: ctx, requestID: info.id, body: body, header: r.Header, req: textRequest{Model: req.Model}, Admission: ad, span: info.span}
	res, cand, err := e.invoke(c, upstream.EmbedRequest{Body: body, Texts: req.Texts, Dimensions: req.Dimensions, Base64: req.Base64})
	if err != nil {
		t.release(c)
		t.writeUpstreamError(w, err)
		return
	}
	requestServed(c.span, *cand)
	info.backend = cand.Backend.Name
	u := upstream.Usage{InputTokens: res.PromptTokens, ReportedTotalTokens: res.ReportedTotal}
	if !res.Reported {
		u.InputTokens, u.ReportedTotalTokens = req.estimateTokens(), nil
	}
	out, err := renderEmbeddings(req, res, u.InputTokens)
	if err != nil {
		t.release(c)
		log.FromContext(ctx).Error(err, "render embeddings", "requestID", c.requestID)
		t.p.fail(w, http.StatusBadGateway, "upstream_unavailable", "the upstream's embeddings could not be read")
		return
	}
	if err := t.settle(p, c, cand, u, false); err != nil {
		t.usageNotRecorded(w, c, false, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// refuse writes an admission refusal in OpenAI's shape: a model of another
// family is a 400 that names its endpoint.
func (e *Embeddings) refuse(w http.ResponseWriter, r *admission.Error) {
	status, code := r.Status, r.Code()
	switch r.Reason {
	case admission.WrongFamily:
		code = ""
	case admission.InsufficientQuota:
		status = e.t.p.insufficientQuota
	case admission.RateLimited:
		apierr.RetryAfter(w, r.RetryAfter)
	}
	e.t.p.fail(w, status, code, r.Message)
}

// embedSubject is an embeddings request's part of admission: no checks of
// its own, a text price, and the input estimated from the body's size
// with no output.
type embedSubject struct{ bodyLen int64 }

func (embedSubject) Check(context.Context, *v1.ModelRoute) (bool, *admission.Error) {
	return false, nil
}

func (embedSubject) Facts() pricing.Facts { return pricing.Facts{} }

func (s embedSubject) Estimate(rule *pricing.Rule, _ *v1.ModelRoute, accepted time.Time) (billing.Quota, error) {
	return rule.EstimateText(s.bodyLen, 0, accepted)
}

// invoke tries the plan's candidates in order until one answers, as a
// text call does: failures worth a retry move to the next backend.
func (e *Embeddings) invoke(c *textCall, req upstream.EmbedRequest) (*upstream.EmbedResult, *routing.Candidate, error) {
	t := e.t
	ctx := c.ctx
	deadline := t.Clock.Now().Add(retryBudget)
	var lastErr error
	for i := range c.Plan {
		cand := &c.Plan[i]
		if !t.mayAttempt(i, deadline) {
			break
		}
		emb, ok := t.Upstreams.Embedder(cand.Backend.Provider)
		if !ok {
			lastErr = &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true,
				Message: fmt.Sprintf("provider %q serves no embeddings", cand.Backend.Provider)}
			continue
		}
		backend, err := t.backend(ctx, *cand)
		if err != nil {
			lastErr = errCredentialUnavailable()
			continue
		}
		actx, attempt := startAttempt(ctx, telemetry.OperationEmbeddings, *cand, backend.UpstreamModel, i+1)
		upstreamAttempts(cand.Backend.Name).Inc()
		res, err := upstream.Embed(actx, emb, backend, req)
		if err == nil {
			attempt.End()
			t.Breaker.Success(cand.Key())
			return res, cand, nil
		}
		lastErr = err
		if !t.attemptFailed(ctx, cand, attempt, err) {
			return nil, cand, err
		}
		log.FromContext(ctx).Info("upstream attempt failed; trying the next backend",
			"model", c.req.Model, "backend", cand.Backend.Name, "error", err.Error())
	}
	return nil, nil, lastErr
}

// renderEmbeddings is the client's answer. An upstream that spoke OpenAI's
// wire answers as it did, its model replaced by the client's, unless it
// sent floats where the client asked for base64 (servers that ignore
// encoding_format): those vectors are encoded here. Other upstreams'
// vectors are rendered in OpenAI's list with the billed count as usage.
func renderEmbeddings(req embedRequest, res *upstream.EmbedResult, tokens int64) ([]byte, error) {
	if res.Body != nil {
		vecs, floats, err := openAIVectors(res.Body)
		if err != nil {
			return nil, err
		}
		if !req.Base64 || !floats {
			return translate.SetString(res.Body, req.Model, "model")
		}
		res = &upstream.EmbedResult{Vectors: vecs}
	}
	return appendEmbeddingList(nil, req.Model, res.Vectors, req.Base64, tokens), nil
}

// openAIVectors reads an OpenAI embeddings body's vectors; floats is false
// when they are base64 strings (then vecs is nil).
func openAIVectors(body []byte) (vecs [][]float64, floats bool, err error) {
	var v struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, false, err
	}
	for _, d := range v.Data {
		if len(d.Embedding) == 0 || d.Embedding[0] != '[' {
			return nil, false, nil
		}
		var f []float64
		if err := json.Unmarshal(d.Embedding, &f); err != nil {
			return nil, false, err
		}
		vecs = append(vecs, f)
	}
	return vecs, true, nil
}

// appendEmbeddingList appends OpenAI's embeddings list: each vector as a
// JSON array of numbers or, for base64, its little-endian float32 bytes in
// standard base64 (what OpenAI's SDKs decode).
func appendEmbeddingList(b []byte, model string, vecs [][]float64, b64 bool, tokens int64) []byte {
	b = append(b, `{"object":"list","data":[`...)
	var raw []byte
	for i, vec := range vecs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			raw = raw[:0]
			for _, x := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(x)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, x := range vec {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendFloat(b, x)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	mb, _ := json.Marshal(model)
	b = append(b, mb...)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, tokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, tokens, 10)
	return append(b, "}}"...)
}

// appendFloat writes x as JSON; a non-finite value (which JSON cannot
// carry) as 0.
func appendFloat(b []byte, x float64) []byte {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}
