package fakeupstream_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

func arkDo(t *testing.T, f *fakeupstream.Ark, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.URL+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+f.Key())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestArkImagesWire(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	code, m := arkDo(t, f, http.MethodPost, "/api/v3/images/generations",
		`{"model":"doubao-seedream-4-0-250828","prompt":"p","size":"1760x2368","sequential_image_generation":"disabled","response_format":"url"}`)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(m["usage"]).To(Equal(map[string]any{"generated_images": float64(1), "output_tokens": float64(16280), "total_tokens": float64(16280)}),
		"Ark's published example: 1760x2368 is 16 280 tokens")
	g.Expect(m["data"].([]any)[0].(map[string]any)["size"]).To(Equal("1760x2368"))

	for body, want := range map[string]string{
		`{"model":"doubao-seedream-4-0-250828","prompt":"p","size":"512x512"}`: "InvalidParameter",
		`{"model":"doubao-seedream-4-0-250828"}`:                               "MissingParameter",
		`{"model":"doubao-seedream-4-0-250828","prompt":"p","sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":16}}`: "InvalidParameter",
	} {
		code, m := arkDo(t, f, http.MethodPost, "/api/v3/images/generations", body)
		g.Expect(code).To(Equal(http.StatusBadRequest), body)
		g.Expect(m["error"].(map[string]any)["code"]).To(Equal(want), body)
		g.Expect(m["error"].(map[string]any)["type"]).To(Equal("BadRequest"), body)
	}
	code, m = arkDo(t, f, http.MethodPost, "/api/v3/images/generations", `{"model":"gpt-image-1","prompt":"p"}`)
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(m["error"].(map[string]any)["code"]).To(Equal("InvalidEndpointOrModel.NotFound"))
}

func TestArkTasksWire(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	f.SetPlan(fakeupstream.ArkPlan{Queued: 1, Polls: 1})
	const tasks = "/api/v3/contents/generations/tasks"
	code, m := arkDo(t, f, http.MethodPost, tasks, `{"model":"doubao-seedance-1-0-pro-250528","resolution":"1080p","ratio":"21:9","duration":10,
		"content":[{"type":"text","text":"waves"}]}`)
	g.Expect(code).To(Equal(http.StatusOK))
	id := m["id"].(string)
	for _, want := range []string{"queued", "running"} {
		_, m = arkDo(t, f, http.MethodGet, tasks+"/"+id, "")
		g.Expect(m["status"]).To(Equal(want))
		g.Expect(m).NotTo(HaveKey("content"))
	}
	code, _ = arkDo(t, f, http.MethodDelete, tasks+"/"+id, "")
	g.Expect(code).To(Equal(http.StatusBadRequest), "a running task cannot be cancelled")
	_, m = arkDo(t, f, http.MethodGet, tasks+"/"+id, "")
	g.Expect(m["status"]).To(Equal("succeeded"))
	g.Expect(m["usage"]).To(Equal(map[string]any{"completion_tokens": float64(2206 * 946 * 24 * 10 / 1024), "total_tokens": float64(2206 * 946 * 24 * 10 / 1024)}))
	g.Expect(m["framespersecond"]).To(Equal(float64(24)))

	// Frames cannot be mixed with reference media; a last frame needs a first.
	for _, content := range []string{
		`[{"type":"image_url","image_url":{"url":"https://i/a.png"},"role":"first_frame"},{"type":"video_url","video_url":{"url":"https://v/b.mp4"},"role":"reference_video"}]`,
		`[{"type":"image_url","image_url":{"url":"https://i/a.png"},"role":"last_frame"}]`,
		`[{"type":"audio_url","audio_url":{"url":"https://a/c.mp3"},"role":"reference_image"}]`,
	} {
		code, m = arkDo(t, f, http.MethodPost, tasks, `{"model":"doubao-seedance-2-0-260128","content":`+content+`}`)
		g.Expect(code).To(Equal(http.StatusBadRequest), content)
		g.Expect(m["error"].(map[string]any)["code"]).To(Equal("InvalidParameter"), content)
	}

	unauth, _ := http.NewRequest(http.MethodGet, f.URL+tasks+"/"+id, nil)
	resp, err := http.DefaultClient.Do(unauth)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}
