package taskapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/taskapi"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func call(f *fakeupstream.TaskAPI, kind upstream.Kind, taskID, request string) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "up", Provider: taskapi.Name, BaseURL: f.URL + "/v1", APIKey: f.Key(),
			UpstreamModel: "vendor-video-3"},
		Kind: kind, TaskID: taskID, Request: json.RawMessage(request),
	}
}

func classOf(t *testing.T, err error) *upstream.Error {
	t.Helper()
	var ue *upstream.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v is not an *upstream.Error", err)
	}
	return ue
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := fakeupstream.Client().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b
}

func TestVideoTaskRunsToCompletion(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	video := []byte("\x00\x00\x00\x18ftypmp42 a small video")
	f.SetPlan(fakeupstream.TaskPlan{Polls: 2, Output: video, ContentType: "video/mp4", ReportSeconds: 6})
	a := taskapi.Adapter{Client: fakeupstream.Client()}
	c := call(f, upstream.Video, "task_abc", `{"model":"brand-video","prompt":"a cat","duration":8,"ratio":"16:9"}`)

	s, err := a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.Final != nil {
		t.Fatalf("submission %+v: want an ID and no final state", s)
	}
	req := f.Requests()[0]
	if req.Path != "/v1/videos/generations" || req.Header.Get("Authorization") != "Bearer "+f.Key() ||
		req.Header.Get("Idempotency-Key") != "task_abc" {
		t.Fatalf("request %s %v", req.Path, req.Header)
	}
	body := req.JSON()
	if body["model"] != "vendor-video-3" || body["client_business_id"] != "task_abc" || body["prompt"] != "a cat" ||
		body["duration"] != float64(8) || body["ratio"] != "16:9" {
		t.Fatalf("forwarded body %v", body)
	}

	var progress []int
	var st upstream.Status
	for range 3 {
		if st, err = a.Poll(context.Background(), c, s.ID); err != nil {
			t.Fatal(err)
		}
		if st.State == upstream.Running {
			progress = append(progress, st.Progress)
		}
	}
	if len(progress) != 2 || progress[0] != 33 || progress[1] != 66 {
		t.Fatalf("progress %v, want [33 66]", progress)
	}
	if st.State != upstream.Succeeded || len(st.Outputs) != 1 || st.VideoSeconds != 6 {
		t.Fatalf("final status %+v", st)
	}
	if got := fetch(t, st.Outputs[0].URL); string(got) != string(video) {
		t.Fatalf("output bytes %q", got)
	}
	if got := f.Requests()[1]; got.Method != http.MethodGet || got.Path != "/v1/videos/generations/"+s.ID {
		t.Fatalf("poll %s %s", got.Method, got.Path)
	}
}

func TestARepeatedSubmissionReplaysTheFirst(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	a := taskapi.Adapter{Client: fakeupstream.Client()}
	c := call(f, upstream.Image, "task_same", `{"model":"img","prompt":"two","n":2}`)
	s1, err := a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID != s2.ID || f.Submissions() != 1 {
		t.Fatalf("ids %s %s, %d submissions", s1.ID, s2.ID, f.Submissions())
	}
	if f.Requests()[0].Path != "/v1/images/generations" {
		t.Fatalf("path %s", f.Requests()[0].Path)
	}
	st, err := a.Poll(context.Background(), c, s1.ID)
	if err != nil || st.State != upstream.Succeeded || len(st.Outputs) != 2 {
		t.Fatalf("poll: %+v %v", st, err)
	}
}

func TestRateLimitedPollsCarryRetryAfter(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	now := time.Now()
	f.SetPlan(fakeupstream.TaskPlan{RateLimited: 1, RetryAfter: "7"})
	a := taskapi.Adapter{Client: fakeupstream.Client(), Now: func() time.Time { return now }}
	c := call(f, upstream.Image, "task_rl", `{"model":"img","prompt":"p"}`)
	s, err := a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Poll(context.Background(), c, s.ID)
	ue := classOf(t, err)
	if ue.Class != upstream.Transient || ue.Status != 429 || ue.RetryAfter != 7*time.Second {
		t.Fatalf("rate-limited poll: %+v", ue)
	}
	if st, err := a.Poll(context.Background(), c, s.ID); err != nil || st.State != upstream.Succeeded {
		t.Fatalf("poll after the wait: %+v %v", st, err)
	}

	// An HTTP date.
	date := now.Add(20 * time.Second).UTC().Format(http.TimeFormat)
	f.SetPlan(fakeupstream.TaskPlan{RateLimited: 1, RetryAfter: date})
	c.TaskID = "task_rl2"
	s, err = a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Poll(context.Background(), c, s.ID)
	if ue := classOf(t, err); ue.RetryAfter <= 18*time.Second || ue.RetryAfter > 20*time.Second {
		t.Fatalf("Retry-After %q read as %s", date, ue.RetryAfter)
	}
}

func TestSubmissionFailuresAreClassified(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	a := taskapi.Adapter{Client: fakeupstream.Client()}
	c := call(f, upstream.Video, "task_x", `{"model":"v","prompt":"p"}`)

	f.FailSubmits(fakeupstream.SubmitFailure{Status: 500, Message: "boom"})
	_, err := a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Failover || !ue.Retryable || ue.Status != 500 {
		t.Fatalf("500: %+v", ue)
	}

	f.FailSubmits(fakeupstream.SubmitFailure{Status: 429, RetryAfter: "4"})
	_, err = a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Failover || ue.RetryAfter != 4*time.Second {
		t.Fatalf("429: %+v", ue)
	}

	// A reset connection (Go's transport retries a request carrying an
	// Idempotency-Key once on a fresh connection: reset that one too).
	rf := fakeupstream.NewTaskAPI()
	defer rf.Close()
	rf.FailSubmits(fakeupstream.SubmitFailure{Reset: true}, fakeupstream.SubmitFailure{Reset: true})
	_, err = a.Submit(context.Background(), call(rf, upstream.Video, "task_x", `{"model":"v","prompt":"p"}`))
	if ue := classOf(t, err); ue.Class != upstream.Failover || !ue.Retryable {
		t.Fatalf("reset: %+v", ue)
	}

	f.FailSubmits(fakeupstream.SubmitFailure{Status: 400, Message: "duration must be between 2 and 30 seconds"})
	_, err = a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Permanent || ue.Message != "duration must be between 2 and 30 seconds" {
		t.Fatalf("400: %+v", ue)
	}

	bad := c
	bad.Backend.APIKey = "wrong"
	_, err = a.Submit(context.Background(), bad)
	if ue := classOf(t, err); ue.Class != upstream.Failover || ue.Retryable || ue.Status != 401 {
		t.Fatalf("401: %+v", ue)
	}

	refused := c
	refused.Backend.BaseURL = fakeupstream.RefusedURL()
	_, err = a.Submit(context.Background(), refused)
	if ue := classOf(t, err); ue.Class != upstream.Failover || !ue.Retryable {
		t.Fatalf("refused: %+v", ue)
	}

	none := c
	none.Backend.BaseURL = ""
	_, err = a.Submit(context.Background(), none)
	if ue := classOf(t, err); ue.Class != upstream.Failover || ue.Retryable {
		t.Fatalf("no base URL: %+v", ue)
	}
	if f.Submissions() != 0 {
		t.Fatalf("%d tasks accepted", f.Submissions())
	}
}

func TestUpstreamFailureAndLostTasks(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	a := taskapi.Adapter{Client: fakeupstream.Client()}
	f.SetPlan(fakeupstream.TaskPlan{Polls: 1, Fail: "the content was flagged by moderation"})
	c := call(f, upstream.Video, "task_f", `{"model":"v","prompt":"p"}`)
	s, err := a.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := a.Poll(context.Background(), c, s.ID)
	if st.State != upstream.Running || st.Progress != 50 {
		t.Fatalf("first poll %+v", st)
	}
	st, err = a.Poll(context.Background(), c, s.ID)
	if err != nil || st.State != upstream.Failed || st.ErrorMessage != "the content was flagged by moderation" {
		t.Fatalf("failed task: %+v %v", st, err)
	}

	_, err = a.Poll(context.Background(), c, "task_unknown")
	if ue := classOf(t, err); ue.Class != upstream.Permanent || ue.Status != 404 {
		t.Fatalf("unknown task: %+v", ue)
	}
	img := c
	img.Kind = upstream.Image
	_, err = a.Poll(context.Background(), img, s.ID)
	if ue := classOf(t, err); ue.Class != upstream.Permanent || !strings.Contains(ue.Message, "not found") {
		t.Fatalf("task of the other family: %+v", ue)
	}
}

func TestValidationErrorFromTheUpstreamIsPermanent(t *testing.T) {
	f := fakeupstream.NewTaskAPI()
	defer f.Close()
	_, err := taskapi.Adapter{Client: fakeupstream.Client()}.Submit(context.Background(), call(f, upstream.Image, "task_v", `{"model":"img","prompt":"  "}`))
	if ue := classOf(t, err); ue.Class != upstream.Permanent || ue.Message != "prompt is required" {
		t.Fatalf("%+v", ue)
	}
}
