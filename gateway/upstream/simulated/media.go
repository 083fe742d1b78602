// The task capability of the simulated provider: images and videos
// rendered in process (small deterministic PNGs and animated GIFs), after a
// generation time, polled like any upstream task. Backend options: "delay"
// (the generation time, a Go duration; default DefaultDelay) and, for
// private asset review, "reviewDelay" (default DefaultReviewTime).

package simulated

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/png"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// MediaDirectives are the simulated media backend's test hooks, written in the prompt:
// "[sim:fail]" makes the task fail (error.code generation_failed) and
// "[sim:delay=1.5s]" overrides the backend's generation time.
type MediaDirectives struct {
	Fail  bool
	Delay time.Duration // 0: not set
}

var mediaDirectiveRE = regexp.MustCompile(`\[sim:([a-z]+)(?:=([^\]]*))?\]`)

// ParseMediaDirectives reads the directives of a stored request body.
func ParseMediaDirectives(request []byte) MediaDirectives {
	var body struct {
		Prompt string `json:"prompt"`
	}
	_ = json.Unmarshal(request, &body)
	var d MediaDirectives
	for _, m := range mediaDirectiveRE.FindAllStringSubmatch(body.Prompt, -1) {
		switch m[1] {
		case "fail":
			d.Fail = true
		case "delay":
			if v, err := time.ParseDuration(m[2]); err == nil && v >= 0 {
				d.Delay = v
			}
		}
	}
	return d
}

// simulated output sizes: small, to keep generation and tests fast.
const (
	simLongSide   = 64
	simGIFFrames  = 8
	simFrameDelay = 12 // hundredths of a second per frame
)

// simSize maps a requested size ("16:9", "1280x720", "1280*720") to a small
// image of the same aspect, 64 px on its long side; 64x64 when unknown.
func simSize(size string) (int, int) {
	w, h := 1.0, 1.0
	for _, sep := range []string{":", "x", "*"} {
		if a, b, ok := strings.Cut(size, sep); ok {
			fw, err1 := strconv.ParseFloat(a, 64)
			fh, err2 := strconv.ParseFloat(b, 64)
			if err1 == nil && err2 == nil && fw > 0 && fh > 0 {
				w, h = fw, fh
			}
			break
		}
	}
	if w >= h {
		return simLongSide, max(1, int(float64(simLongSide)*h/w+0.5))
	}
	return max(1, int(float64(simLongSide)*w/h+0.5)), simLongSide
}

// requestSize reads the size (image) or ratio (video) of a stored request.
func requestSize(request []byte) string {
	var body struct {
		Size  string `json:"size"`
		Ratio string `json:"ratio"`
	}
	_ = json.Unmarshal(request, &body)
	if body.Size != "" {
		return body.Size
	}
	return body.Ratio
}

// seedColor derives a deterministic colour from the task ID and output index.
func seedColor(taskID string, i int) (r, g, b uint8) {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", taskID, i)))
	return sum[0], sum[1], sum[2]
}

// RenderImage renders output i of a task as a PNG: a deterministic
// gradient in the requested aspect ratio.
func RenderImage(taskID string, i int, request []byte) ([]byte, error) {
	w, h := simSize(requestSize(request))
	r0, g0, b0 := seedColor(taskID, i)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{R: r0 + uint8(x*2), G: g0 + uint8(y*2), B: b0 + uint8((x + y)), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RenderVideo renders a task's video as an animated GIF (image/gif, 8
// frames at 8 fps): a real, small animation file every browser plays, not an
// MP4 stream.
func RenderVideo(taskID string, request []byte) ([]byte, error) {
	w, h := simSize(requestSize(request))
	r0, g0, b0 := seedColor(taskID, 0)
	anim := &gif.GIF{LoopCount: 0}
	for f := range simGIFFrames {
		frame := image.NewPaletted(image.Rect(0, 0, w, h), palette.WebSafe)
		bar := f * w / simGIFFrames
		for y := range h {
			for x := range w {
				c := color.RGBA{R: r0, G: g0 + uint8(y*3), B: b0 + uint8(x*3), A: 255}
				if x >= bar && x < bar+max(1, w/simGIFFrames) {
					c = color.RGBA{R: 255, G: 255, B: 255, A: 255}
				}
				frame.Set(x, y, c)
			}
		}
		anim.Image = append(anim.Image, frame)
		anim.Delay = append(anim.Delay, simFrameDelay)
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, anim); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DefaultDelay is the simulated generation time (backend option "delay" or
// a "[sim:delay=…]" prompt directive overrides it).
const DefaultDelay = 2 * time.Second

// Poll cadence of a simulated task: half the time already waited, within
// these bounds, never past the expected end.
const (
	minPoll = 250 * time.Millisecond
	maxPoll = 10 * time.Second
)

// Simulated image token usage, as a token-priced image model reports it.
const (
	ImageOutputTokens = 1056 // one 1024x1024 image at medium quality, as gpt-image-1 reports it
	ImageInputTokens  = 258  // one reference image
)

// Media is the simulated task adapter (and private asset reviewer).
type Media struct{}

var (
	_ upstream.TaskAdapter   = Media{}
	_ upstream.AssetReviewer = Media{}
)

// Submit implements upstream.TaskAdapter: the task is accepted at once and
// is due after its delay.
func (Media) Submit(_ context.Context, c upstream.Call) (upstream.Submitted, error) {
	return upstream.Submitted{ID: "sim-" + c.TaskID, NextPoll: pollWait(0, delayOf(c))}, nil
}

// Poll implements upstream.TaskAdapter: running (with progress) until the
// delay has passed since the submission, then the rendered outputs, or the
// failure a "[sim:fail]" directive asks for.
func (Media) Poll(_ context.Context, c upstream.Call, _ string) (upstream.Status, error) {
	delay, elapsed := delayOf(c), c.Elapsed
	if elapsed < delay {
		return upstream.Status{State: upstream.Running, Progress: int(min(99, elapsed*100/max(delay, 1))),
			NextPoll: pollWait(elapsed, delay)}, nil
	}
	if ParseMediaDirectives(c.Request).Fail {
		return upstream.Status{State: upstream.Failed,
			ErrorMessage: "the simulated backend failed the generation as the prompt asked ([sim:fail])"}, nil
	}
	if c.Kind == upstream.Video {
		data, err := RenderVideo(c.TaskID, c.Request)
		if err != nil {
			return upstream.Status{}, err
		}
		seconds := c.DurationSeconds
		if seconds <= 0 {
			seconds = media.VideoDefaultDuration // the length the model picks
		}
		return upstream.Status{State: upstream.Succeeded, Progress: 100, VideoSeconds: seconds,
			Outputs: []upstream.Output{{Data: data, ContentType: "image/gif"}}}, nil
	}
	n := max(c.Outputs, 1)
	st := upstream.Status{State: upstream.Succeeded, Progress: 100, Usage: imageUsage(promptBytes(c.Request), c.InputImages, n)}
	for i := range int(n) {
		data, err := RenderImage(c.TaskID, i, c.Request)
		if err != nil {
			return upstream.Status{}, err
		}
		st.Outputs = append(st.Outputs, upstream.Output{Data: data, ContentType: "image/png"})
	}
	return st, nil
}

// delayOf is the generation time of a task: the prompt's directive, else the
// backend's option, else DefaultDelay.
func delayOf(c upstream.Call) time.Duration {
	if d := ParseMediaDirectives(c.Request).Delay; d > 0 {
		return d
	}
	if v, ok := c.Backend.Options["delay"]; ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	return DefaultDelay
}

// pollWait is the wait before the next poll of a task that has run for
// elapsed of its total: half of elapsed within [minPoll, maxPoll], never
// past the expected end.
func pollWait(elapsed, total time.Duration) time.Duration {
	wait := min(max(elapsed/2, minPoll), maxPoll)
	if left := total - elapsed; left > 0 && left < wait {
		wait = left
	}
	return wait
}

// imageUsage is the deterministic usage of a simulated image task: a token
// per 4 prompt bytes (at least 1), ImageInputTokens per reference image and
// ImageOutputTokens per output.
func imageUsage(promptBytes, references, outputs int64) *upstream.ImageUsage {
	text := max((promptBytes+3)/4, 1)
	image := references * ImageInputTokens
	out := outputs * ImageOutputTokens
	return &upstream.ImageUsage{InputTokens: text + image, OutputTokens: out, TotalTokens: text + image + out,
		InputTokensDetails:  &upstream.ImageInputDetails{TextTokens: text, ImageTokens: image},
		OutputTokensDetails: &upstream.ImageOutputDetails{ImageTokens: out}}
}

func promptBytes(request []byte) int64 {
	var body struct {
		Prompt string `json:"prompt"`
	}
	_ = json.Unmarshal(request, &body)
	return int64(len(body.Prompt))
}

// DefaultReviewTime is how long the simulated review service takes to
// decide (backend option "reviewDelay" overrides it).
const DefaultReviewTime = time.Second

// Decide implements upstream.AssetReviewer. It decides an asset once its
// preparation is "reviewDelay" old: an asset whose key (URL) contains
// "reject" is rejected, one containing "slow" is never decided (its round
// runs into the deadline), anything else passes — inline images, keyed by
// their content digest, pass.
func (Media) Decide(_ context.Context, b upstream.Backend, a upstream.ReviewAsset, now time.Time) (upstream.ReviewDecision, error) {
	if strings.Contains(a.Key, "slow") {
		return upstream.ReviewDecision{State: upstream.ReviewPending, Wait: time.Minute}, nil
	}
	if left := a.PreparedAt.Add(reviewTime(b)).Sub(now); left > 0 {
		return upstream.ReviewDecision{State: upstream.ReviewPending, Wait: left}, nil
	}
	if strings.Contains(a.Key, "reject") {
		return upstream.ReviewDecision{State: upstream.ReviewRejected}, nil
	}
	return upstream.ReviewDecision{State: upstream.ReviewPassed}, nil
}

func reviewTime(b upstream.Backend) time.Duration {
	if v, ok := b.Options["reviewDelay"]; ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	return DefaultReviewTime
}

// Adapter is the "simulated" entry of the registry: the messages text
// provider and the media tasks under one provider name.
type Adapter struct {
	*Provider
	Media
}
