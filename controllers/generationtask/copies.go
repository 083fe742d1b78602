package generationtask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// The reviewed copies of a task's assets: what the upstream receives and
// what the input video is billed by once review passed.

// passedRound is the task's last review round when it passed (nil when
// the task had no review, or it has not passed).
func passedRound(t *v1.GenerationTask) *v1.ReviewRound {
	if n := len(t.Status.ReviewRounds); n > 0 && t.Status.ReviewRounds[n-1].Outcome == v1.ReviewPassed {
		return &t.Status.ReviewRounds[n-1]
	}
	return nil
}

// inputVideoSeconds is the input video length to bill, whole seconds
// rounded up: after a passed review the reviewed videos count with the
// durations read from their copies (plus video_list as the gateway counted
// it); otherwise, or while a reviewed video has no probed duration, the
// gateway's figure (declared seconds, or an upload's probed ones).
func inputVideoSeconds(t *v1.GenerationTask, sub *tasks.Submission) int64 {
	round := passedRound(t)
	if round == nil {
		return sub.InputVideoSeconds
	}
	millis, probed := sub.ListVideoMillis, false
	for _, a := range round.Assets {
		if a.Type != "video" {
			continue
		}
		if a.DurationMillis <= 0 {
			return sub.InputVideoSeconds
		}
		millis, probed = millis+a.DurationMillis, true
	}
	if !probed {
		return sub.InputVideoSeconds
	}
	return (millis + 999) / 1000
}

// forwardCopies rewrites a stored request so that every reviewed URL asset
// names its reviewed copy ("blob:<key>", signed when forwarded): the
// upstream fetches the bytes review checked, never the tenant's URL, which
// may serve other bytes by now or reach what the upstream should not. An
// asset the channel's library keeps (upstreamRef, Ark's asset://<id>) is
// named by that reference instead, in place of the URL or of the inline
// image's "blob:<key>".
func forwardCopies(request []byte, t *v1.GenerationTask) ([]byte, error) {
	round := passedRound(t)
	if round == nil {
		return request, nil
	}
	copies := map[string]string{}
	for _, a := range round.Assets {
		inline := strings.HasPrefix(a.URL, media.InlineKeyPrefix)
		switch {
		case a.UpstreamRef != "" && !inline:
			copies[a.URL] = a.UpstreamRef
		case a.UpstreamRef != "" && a.Copy != "":
			copies[tasks.BlobScheme+a.Copy] = a.UpstreamRef
		case a.Copy != "" && !inline:
			copies[a.URL] = tasks.BlobScheme + a.Copy
		}
	}
	if len(copies) == 0 {
		return request, nil
	}
	dec := json.NewDecoder(bytes.NewReader(request))
	dec.UseNumber() // numbers pass through unchanged
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("stored request: %w", err)
	}
	v = tasks.RewriteStrings(v, func(s string) string {
		if c, ok := copies[s]; ok {
			return c
		}
		return s
	})
	return json.Marshal(v)
}

// blobKeyOf is where the gateway stored an inline review asset ("" for URLs).
func blobKeyOf(sub *tasks.Submission, key string) string {
	for _, a := range sub.ReviewAssets {
		if a.URL == key {
			return a.BlobKey
		}
	}
	return ""
}
