package translate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var (
	allProtocols = []Protocol{Messages, ChatCompletions, Responses}
	fixtureReqs  = map[Protocol]string{Messages: fixtureMessagesRequest, ChatCompletions: fixtureChatRequest, Responses: fixtureResponsesRequest}
	fixtureResps = map[Protocol]string{Messages: fixtureMessagesResponse, ChatCompletions: fixtureChatResponse, Responses: fixtureResponsesResponse}
	fixtureSSE   = map[Protocol]string{Messages: fixtureMessagesStream, ChatCompletions: fixtureChatStream, Responses: fixtureResponsesStream}
)

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	NewWithT(t).Expect(got).To(Equal(string(want)), "golden %s", path)
}

// TestGoldenTranslations checks every translation pair and direction:
// request (client → upstream), complete response and stream (upstream →
// client), against reviewed outputs in testdata.
func TestGoldenTranslations(t *testing.T) {
	for _, from := range allProtocols {
		for _, to := range allProtocols {
			if from == to {
				continue
			}
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				g := NewWithT(t)
				req, _, err := TranslateRequest(from, to, []byte(fixtureReqs[from]), "up-model")
				g.Expect(err).NotTo(HaveOccurred())
				golden(t, fmt.Sprintf("request_%s_to_%s", from, to), normalize(req)+"\n")

				resp, _, err := TranslateResponse(from, to, []byte(fixtureResps[from]), "client-model", nil)
				g.Expect(err).NotTo(HaveOccurred())
				golden(t, fmt.Sprintf("response_%s_to_%s", from, to), normalize(resp)+"\n")

				stream, tr, err := translateAll(from, to, fixtureSSE[from], StreamOptions{IncludeUsage: true})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(tr.Done()).To(BeTrue())
				golden(t, fmt.Sprintf("stream_%s_to_%s", from, to), stream)
			})
		}
	}
}
