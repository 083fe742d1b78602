package apierr

import "fmt"

// The error type of an HTTP status, one table per protocol family. Every
// error the gateway answers takes its type from here, whether the gateway
// made it (a refusal, an outage of its own) or relays it from an upstream
// (translate.ErrorBody, providers.UpstreamError.ClientBody, translated
// stream error events). docs/api-choices.md, "Error types by status",
// gives the table and where each entry comes from.

// family is one protocol family's table: the statuses its public API names,
// then the type of any other 4xx (the client's fault) and of any other
// status (5xx: the server's fault).
type family struct {
	byStatus       map[int]string
	client, server string
}

func (f family) typeOf(status int) string {
	if t, ok := f.byStatus[status]; ok {
		return t
	}
	if status >= 400 && status < 500 {
		return f.client
	}
	return f.server
}

// anthropic: https://docs.anthropic.com/en/api/errors ("HTTP errors"). The
// page adds that invalid_request_error "may also be used for other 4XX
// status codes not listed"; a 5xx it does not list (502, 503) is api_error,
// its type for an unexpected internal error. 529, not 503, is overload.
var anthropic = family{
	byStatus: map[int]string{
		400: "invalid_request_error",
		401: "authentication_error",
		402: "billing_error",
		403: "permission_error",
		404: "not_found_error",
		413: "request_too_large",
		429: "rate_limit_error",
		500: "api_error",
		504: "timeout_error",
		529: "overloaded_error",
	},
	client: "invalid_request_error",
	server: "api_error",
}

// openAI: OpenAI's error guide (https://platform.openai.com/docs/guides/error-codes)
// lists the statuses but not the type strings; its bodies carry
// invalid_request_error for a client error, insufficient_quota for an
// exhausted balance and server_error for a server failure ("The server had
// an error while processing your request."; openai-go's ResponseErrorCode
// names server_error too), so every 5xx is server_error. The contract's
// common gateway errors name 401 authentication_error, 404 not_found_error
// and 429 rate_limit_error, and the contract wins over OpenAI's own 401
// invalid_request_error; 403 permission_error follows the same naming.
var openAI = family{
	byStatus: map[int]string{
		400: "invalid_request_error",
		401: "authentication_error",
		402: "insufficient_quota",
		403: "permission_error",
		404: "not_found_error",
		429: "rate_limit_error",
		500: "server_error",
	},
	client: "invalid_request_error",
	server: "server_error",
}

// MessagesType is the error type of an HTTP status on the messages
// protocol (Anthropic's family).
func MessagesType(status int) string { return anthropic.typeOf(status) }

// OpenAIType is the error type of an HTTP status on the OpenAI-shaped
// endpoints (chat completions, responses) and in the common gateway shape.
func OpenAIType(status int) string { return openAI.typeOf(status) }

// statusOf maps every type of both tables back to its status. The families
// share some types (invalid_request_error, rate_limit_error, ...) and give
// them the same status, so one map serves both.
var statusOf = func() map[string]int {
	m := map[string]int{}
	for _, f := range []family{anthropic, openAI} {
		for status, typ := range f.byStatus {
			if s, ok := m[typ]; ok && s != status {
				panic(fmt.Sprintf("apierr: %s stands for both %d and %d", typ, s, status))
			}
			m[typ] = status
		}
	}
	return m
}()

// StatusOf is the HTTP status an error type of either family stands for,
// for errors that carry a type but no status (a stream's error event). ok
// is false for a type neither table has.
func StatusOf(typ string) (status int, ok bool) {
	status, ok = statusOf[typ]
	return status, ok
}
