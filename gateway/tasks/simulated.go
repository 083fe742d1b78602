package tasks

import (
	"bytes"
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
)

// SimulatedProvider is the provider name of the built-in media backend.
const SimulatedProvider = "simulated"

// Directives are the simulated backend's test hooks, written in the prompt:
// "[sim:fail]" makes the task fail (error.code generation_failed) and
// "[sim:delay=1.5s]" overrides the backend's generation time.
type Directives struct {
	Fail  bool
	Delay time.Duration // 0: not set
}

var directiveRE = regexp.MustCompile(`\[sim:([a-z]+)(?:=([^\]]*))?\]`)

// ParseDirectives reads the directives of a stored request body.
func ParseDirectives(request []byte) Directives {
	var body struct {
		Prompt string `json:"prompt"`
	}
	_ = json.Unmarshal(request, &body)
	var d Directives
	for _, m := range directiveRE.FindAllStringSubmatch(body.Prompt, -1) {
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

// SimulatedImage renders output i of a task as a PNG: a deterministic
// gradient in the requested aspect ratio.
func SimulatedImage(taskID string, i int, request []byte) ([]byte, error) {
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

// SimulatedVideo renders a task's video as an animated GIF (image/gif, 8
// frames at 8 fps): a real, small animation file every browser plays, not an
// MP4 stream.
func SimulatedVideo(taskID string, request []byte) ([]byte, error) {
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
