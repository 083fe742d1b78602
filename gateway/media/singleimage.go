package media

import (
	"context"
	"strconv"
	"strings"
)

// Limits of the single-image family.
const (
	SingleImageMaxRefs    = 3
	SingleImageMinArea    = 512 * 512
	SingleImageMaxArea    = 2048 * 2048
	SingleImageMaxAspect  = 8 // aspect between 1:8 and 8:1
	singleImageMaxSideLen = 7 // digits of one side of an explicit size
)

var singleImageResolutions = []string{"1K", "2K"}

// SingleImagePixelSize is the single-image family's pixel mapping table:
// the output size of an aspect ratio at resolution 1K or 2K. ok is false for
// a ratio or resolution outside the table.
func SingleImagePixelSize(ratio, resolution string) (width, height int, ok bool) {
	table := map[string][2][2]int{
		"1:1":  {{1024, 1024}, {2048, 2048}},
		"4:3":  {{1152, 864}, {1600, 1200}},
		"3:4":  {{864, 1152}, {1200, 1600}},
		"16:9": {{1280, 720}, {1920, 1080}},
		"9:16": {{720, 1280}, {1080, 1920}},
		"3:2":  {{1152, 768}, {1728, 1152}},
		"2:3":  {{768, 1152}, {1152, 1728}},
	}
	sizes, found := table[ratio]
	if !found {
		return 0, 0, false
	}
	switch resolution {
	case "1K":
		return sizes[0][0], sizes[0][1], true
	case "2K":
		return sizes[1][0], sizes[1][1], true
	}
	return 0, 0, false
}

// ParsePixelSize parses an explicit size written WIDTH*HEIGHT or
// WIDTHxHEIGHT (x or X). It checks only the syntax.
func ParsePixelSize(s string) (width, height int, ok bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, "*xX")
	if i <= 0 || i == len(s)-1 {
		return 0, 0, false
	}
	w, okW := parseSide(s[:i])
	h, okH := parseSide(s[i+1:])
	return w, h, okW && okH
}

func parseSide(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > singleImageMaxSideLen {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(s)
	return v, err == nil && v > 0
}

// oneImagePrologue reads what the single-output families share: the model,
// a required prompt, and n, which may only be 1.
func oneImagePrologue(body fields) (req map[string]any, model string, err *ValidationError) {
	req = map[string]any{}
	if model, err = body.model(req); err != nil {
		return nil, "", err
	}
	prompt, err := body.requiredPrompt(0)
	if err != nil {
		return nil, "", err
	}
	req["prompt"] = prompt
	if v, ok, err := body.integer("n"); err != nil {
		return nil, "", err
	} else if ok && v != 1 {
		return nil, "", invalid("n", "n must be 1 for this model: exactly one image is generated per request (got %d)", v)
	}
	return req, model, nil
}

func validateSingleImage(_ context.Context, body fields, _ Options) (*Normalized, *ValidationError) {
	req, model, err := oneImagePrologue(body)
	if err != nil {
		return nil, err
	}
	req["n"] = 1

	urls, err := body.imageURLs("image_urls", SingleImageMaxRefs)
	if err != nil {
		return nil, err
	}
	if len(urls) > 0 {
		req["image_urls"] = urls
	}

	meta, _, err := body.object("metadata")
	if err != nil {
		return nil, err
	}

	// resolution: top level, or metadata.resolution; both must agree.
	res, err := body.enum("resolution", singleImageResolutions, "")
	if err != nil {
		return nil, err
	}
	metaRes, err := meta.enum("resolution", singleImageResolutions, "")
	if err != nil {
		return nil, err
	}
	if res != "" && metaRes != "" && res != metaRes {
		return nil, invalid("resolution", "resolution (%s) and metadata.resolution (%s) disagree; send one of them", res, metaRes)
	}
	if res == "" {
		res = metaRes
	}
	if res == "" {
		res = "1K"
	}
	req["resolution"] = res

	out := &Normalized{Model: model, Request: req, N: 1, MaxOutputs: 1, ReferenceImages: len(urls), Resolution: res}

	rawSize, hasSize, err := body.str("size")
	if err != nil {
		return nil, err
	}
	if hasSize {
		if ratio, ok := canonical(rawSize, ratiosBasic); ok {
			out.Size = ratio
			out.Width, out.Height, _ = SingleImagePixelSize(ratio, res)
		} else if w, h, ok := ParsePixelSize(rawSize); ok {
			area := int64(w) * int64(h)
			if area < SingleImageMinArea || area > SingleImageMaxArea {
				return nil, invalid("size", "size %dx%d has %d pixels; the pixel area must be between 512*512 (262144) and 2048*2048 (4194304)", w, h, area)
			}
			if w > SingleImageMaxAspect*h || h > SingleImageMaxAspect*w {
				return nil, invalid("size", "size %dx%d has an aspect ratio outside 1:8 to 8:1", w, h)
			}
			out.Size = strconv.Itoa(w) + "x" + strconv.Itoa(h)
			out.Width, out.Height = w, h
		} else {
			return nil, invalid("size", "size must be one of %s, or explicit pixels as WIDTH*HEIGHT or WIDTHxHEIGHT (got %q)", strings.Join(ratiosBasic, ", "), clip(rawSize))
		}
		req["size"] = out.Size
	}

	cbid, err := body.clientBusinessID()
	if err != nil {
		return nil, err
	}
	if cbid != "" {
		req["client_business_id"] = cbid
		out.ClientBusinessID = cbid
	}

	outMeta := map[string]any{}
	req["metadata"] = outMeta
	extend, err := meta.boolean("prompt_extend", true)
	if err != nil {
		return nil, err
	}
	outMeta["prompt_extend"] = extend
	mode, err := meta.enum("prompt_extend_mode", []string{"direct", "agent"}, "direct")
	if err != nil {
		return nil, err
	}
	if mode == "agent" && len(urls) > 0 {
		mode = "direct" // agent is text-to-image only
	}
	outMeta["prompt_extend_mode"] = mode
	if neg, ok, err := meta.str("negative_prompt"); err != nil {
		return nil, err
	} else if ok && neg != "" {
		outMeta["negative_prompt"] = neg
	}
	if seed, ok, err := meta.integer("seed"); err != nil {
		return nil, err
	} else if ok {
		outMeta["seed"] = seed
	}
	watermark, err := meta.boolean("watermark", false)
	if err != nil {
		return nil, err
	}
	outMeta["watermark"] = watermark
	return out, nil
}
