package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// GenAI operation names (gen_ai.operation.name) of the gateway's endpoints:
// the three text protocols are chat, image and video submissions are
// content generation, an embeddings call is embeddings, and a token count (which the conventions do not
// name) is count_tokens.
const (
	OperationChat            = "chat"
	OperationGenerateContent = "generate_content"
	OperationCountTokens     = "count_tokens"
	OperationEmbeddings      = "embeddings"
)

// Attribute keys of the GenAI semantic conventions (semconv 1.40) and the
// few modelgate adds. Values never hold credentials or client addresses.
var (
	OperationName  = semconv.GenAIOperationNameKey
	ProviderName   = semconv.GenAIProviderNameKey
	RequestModel   = semconv.GenAIRequestModelKey
	ResponseModel  = semconv.GenAIResponseModelKey
	MaxTokens      = semconv.GenAIRequestMaxTokensKey
	InputTokens    = semconv.GenAIUsageInputTokensKey
	OutputTokens   = semconv.GenAIUsageOutputTokensKey
	CacheRead      = semconv.GenAIUsageCacheReadInputTokensKey
	CacheCreation  = semconv.GenAIUsageCacheCreationInputTokensKey
	ErrorType      = semconv.ErrorTypeKey
	HTTPMethod     = semconv.HTTPRequestMethodKey
	HTTPRoute      = semconv.HTTPRouteKey
	HTTPStatusCode = semconv.HTTPResponseStatusCodeKey

	// RequestID is the gateway's request ID (the request-id header).
	RequestID = attribute.Key("modelgate.request_id")
	// Tenant is the tenant's namespace.
	Tenant = attribute.Key("modelgate.tenant")
	// Backend is the route backend's name.
	Backend = attribute.Key("modelgate.backend")
	// Attempt numbers a request's upstream attempts from 1.
	Attempt = attribute.Key("modelgate.attempt")
	// Stream tells a streamed answer.
	Stream = attribute.Key("modelgate.stream")
	// Refusal is the error code an admission refused with.
	Refusal = attribute.Key("modelgate.refusal")
	// QuotaReserved and QuotaCharged are quota units (500000 = 1 USD).
	QuotaReserved = attribute.Key("modelgate.quota.reserved")
	QuotaCharged  = attribute.Key("modelgate.quota.charged")
	// Cut tells a settlement of a stream that did not finish.
	Cut = attribute.Key("modelgate.stream.cut")
	// Outcome is what a settlement did: "settled" or "released".
	Outcome = attribute.Key("modelgate.settlement")
	// TaskID is the GenerationTask a media submission created.
	TaskID = attribute.Key("modelgate.task_id")
)
