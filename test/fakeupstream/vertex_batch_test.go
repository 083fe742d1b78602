package fakeupstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/oauth2/google"
)

// TestVertexStorage: the Cloud Storage calls take the service account's
// token, list page by page and give back what was uploaded.
func TestVertexStorage(t *testing.T) {
	g := NewWithT(t)
	s := NewVertex()
	defer s.Close()
	creds, err := google.CredentialsFromJSONWithType(context.Background(), []byte(s.ServiceAccountJSON()), google.ServiceAccount, vertexScope)
	g.Expect(err).NotTo(HaveOccurred())
	tok, err := creds.TokenSource.Token()
	g.Expect(err).NotTo(HaveOccurred())
	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, _ := call("POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name=a%2Fone.jsonl", "", "{}\n")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	for _, name := range []string{"a/one.jsonl", "a/two.jsonl", "a/three.jsonl", "b/other.jsonl"} {
		code, body := call("POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name="+url.QueryEscape(name), tok.AccessToken, `{"n":"`+name+`"}`+"\n")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring(`"name":"` + name + `"`))
	}
	code, _ = call("POST", "/upload/storage/v1/b/bkt/o?uploadType=multipart&name=x", tok.AccessToken, "x")
	g.Expect(code).To(Equal(http.StatusBadRequest))

	var names []string
	token := ""
	for pages := 0; ; pages++ {
		g.Expect(pages).To(BeNumerically("<", 3))
		code, body := call("GET", "/storage/v1/b/bkt/o?prefix=a%2F&maxResults=2&pageToken="+url.QueryEscape(token), tok.AccessToken, "")
		g.Expect(code).To(Equal(http.StatusOK))
		var page struct {
			Items []struct {
				Name string `json:"name"`
				Size string `json:"size"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		g.Expect(json.Unmarshal([]byte(body), &page)).To(Succeed())
		for _, it := range page.Items {
			names = append(names, it.Name)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	g.Expect(names).To(Equal([]string{"a/one.jsonl", "a/three.jsonl", "a/two.jsonl"}))

	code, body := call("GET", "/storage/v1/b/bkt/o/"+url.PathEscape("a/two.jsonl")+"?alt=media", tok.AccessToken, "")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal(`{"n":"a/two.jsonl"}` + "\n"))
	code, body = call("GET", "/storage/v1/b/bkt/o/"+url.PathEscape("a/none")+"?alt=media", tok.AccessToken, "")
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("No such object: bkt/a/none"))

	// A job in another project is refused; an unknown field too.
	code, _ = call("POST", "/v1/projects/other/locations/us-east5/batchPredictionJobs", tok.AccessToken, "{}")
	g.Expect(code).To(Equal(http.StatusForbidden))
	code, body = call("POST", "/v1/projects/"+VertexProject+"/locations/us-east5/batchPredictionJobs", tok.AccessToken, `{"displayName":"x","bogus":1}`)
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring("bogus"))
	g.Expect(s.PredictionJobsCreated()).To(BeZero())
}
