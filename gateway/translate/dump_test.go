package translate

import (
	"fmt"
	"testing"
)

func TestDump(t *testing.T) {
	reqs := map[Protocol]string{Messages: messagesRequest, ChatCompletions: chatRequest, Responses: responsesRequest}
	resps := map[Protocol]string{Messages: messagesResponse, ChatCompletions: chatResponse, Responses: responsesResponse}
	streams := map[Protocol]string{Messages: messagesStream, ChatCompletions: chatStream, Responses: responsesStream}
	ps := []Protocol{Messages, ChatCompletions, Responses}
	for _, from := range ps {
		for _, to := range ps {
			if from == to {
				continue
			}
			out, err := TranslateRequest(from, to, []byte(reqs[from]), "up-model")
			fmt.Printf("REQ %s -> %s (%v)\n%s\n", from, to, err, normalize(out))
			body, u, err := TranslateResponse(from, to, []byte(resps[from]), "client-model")
			fmt.Printf("RESP %s -> %s (%v) %+v\n%s\n", from, to, err, u, normalize(body))
			s, tr, err := translateAll(from, to, streams[from], StreamOptions{IncludeUsage: true})
			fmt.Printf("STREAM %s -> %s (%v) %+v\n%s\n", from, to, err, tr.Usage(), s)
		}
	}
}
