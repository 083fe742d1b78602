package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/gateway/apierr"
)

// Unmatched answers a request that no endpoint matches (404) or that names a
// known path with another method (405) in the error shape of the family the
// path belongs to, so that an SDK parses it as it parses any other error.
// Paths outside every family get the common gateway error.
func Unmatched(w http.ResponseWriter, r *http.Request, status int, allow []string) {
	msg := fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)
	if status == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("%s does not accept %s; it accepts %s", r.URL.Path, r.Method, strings.Join(allow, ", "))
	}
	path := r.URL.Path
	switch {
	case under(path, "/v1/messages"):
		apierr.Messages(w, status, apierr.MessagesType(status), msg)
	case under(path, "/v1/chat"), under(path, "/v1/responses"), under(path, "/v1/completions"),
		under(path, "/v1/embeddings"), under(path, "/v1/models"), under(path, "/v1/files"), under(path, "/v1/batches"):
		apierr.OpenAI(w, status, apierr.OpenAIType(status), "", msg)
	case under(path, "/v1/pricing"):
		apierr.Pricing(w, status, "invalid_request_error", msg)
	case under(path, "/api/usage"):
		apierr.Usage(w, status, usageCode(status), msg)
	case under(path, "/v1/tokens"), under(path, "/v1/balance"), under(path, "/v1/user"), under(path, "/user"),
		under(path, "/v1/uploads"):
		apierr.Simple(w, status, msg)
	default: // tasks, blob links and anything else
		apierr.Common(w, status, apierr.OpenAIType(status), msg)
	}
}

// under reports whether path is prefix or below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func usageCode(status int) string {
	if status == http.StatusMethodNotAllowed {
		return "method_not_allowed"
	}
	return "not_found"
}
