package upstream

import (
	"fmt"
	"strconv"

	"github.com/modelgate/modelgate/gateway/translate"
)

// samplingRanges are the documented ranges of the sampling parameters a
// translation carries over, per client protocol: the Messages API takes
// temperature in 0–1, OpenAI's APIs in 0–2; top_p is 0–1 everywhere.
var samplingRanges = map[Protocol][]struct {
	field  string
	lo, hi float64
}{
	Messages:        {{"temperature", 0, 1}, {"top_p", 0, 1}},
	ChatCompletions: {{"temperature", 0, 2}, {"top_p", 0, 1}},
	Responses:       {{"temperature", 0, 2}, {"top_p", 0, 1}},
}

// samplingError refuses, before a translation, a sampling parameter
// outside the client protocol's range: on a translated call the gateway is
// the only party that knows the client's protocol, and mapping the value
// to another API's range would change what the client asked for. A
// same-protocol call leaves the judgment to the upstream.
func samplingError(client Protocol, body []byte) error {
	for _, r := range samplingRanges[client] {
		raw, ok := translate.FieldRaw(body, r.field)
		if !ok || string(raw) == "null" {
			continue
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return fmt.Errorf("%s: must be a number", r.field)
		}
		if v < r.lo || v > r.hi {
			return fmt.Errorf("%s: must be between %g and %g", r.field, r.lo, r.hi)
		}
	}
	return nil
}
