package media

import (
	"context"
	"fmt"
	"sync"
)

// Limits of the multi-image family.
const (
	MultiImageMaxPromptRunes = 1000
	MultiImageMaxN           = 15
	MultiImageMaxRefs        = 10
	MultiImageMaxTotal       = 15 // references + outputs
	MultiImageRefMaxBytes    = 10 << 20
	MultiImageRefMaxPixels   = 6000 * 6000
	MultiImageRefMinSide     = 15 // width and height must be above 14 px
)

var (
	multiImageSizes       = append(append([]string{}, ratiosExtended...), "auto")
	multiImageResolutions = []string{"1K", "2K", "4K"}
)

// MultiImagePixelSize returns the output size the contract documents for the
// multi-image family: 1:1 and 16:9 at 1K, 2K and 4K. ok is false for other
// combinations (the contract gives no pixel size for them).
func MultiImagePixelSize(ratio, resolution string) (width, height int, ok bool) {
	type key struct{ r, res string }
	table := map[key][2]int{
		{"1:1", "1K"}: {1024, 1024}, {"16:9", "1K"}: {1280, 720},
		{"1:1", "2K"}: {2048, 2048}, {"16:9", "2K"}: {2560, 1440},
		{"1:1", "4K"}: {4096, 4096}, {"16:9", "4K"}: {5404, 3040},
	}
	p, ok := table[key{ratio, resolution}]
	return p[0], p[1], ok
}

func validateMultiImage(ctx context.Context, body fields, opts Options) (*Normalized, *ValidationError) {
	req := map[string]any{}
	model, err := body.model(req)
	if err != nil {
		return nil, err
	}
	prompt, err := body.requiredPrompt(MultiImageMaxPromptRunes)
	if err != nil {
		return nil, err
	}
	req["prompt"] = prompt

	n := int64(1)
	if v, ok, err := body.integer("n"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 || v > MultiImageMaxN {
			return nil, invalid("n", "n must be between 1 and %d (got %d)", MultiImageMaxN, v)
		}
		n = v
	}
	req["n"] = int(n)

	urls, err := body.imageURLs("image_urls", MultiImageMaxRefs)
	if err != nil {
		return nil, err
	}
	if len(urls) > 0 {
		req["image_urls"] = urls
	}
	if total := len(urls) + int(n); total > MultiImageMaxTotal {
		return nil, invalid("n", "reference images plus generated images must total at most %d (image_urls has %d, n is %d)", MultiImageMaxTotal, len(urls), n)
	}

	size, err := body.enum("size", multiImageSizes, "1:1")
	if err != nil {
		return nil, err
	}
	if size == "auto" && len(urls) == 0 {
		return nil, invalid("size", "size auto matches the reference image ratio and requires image_urls")
	}
	req["size"] = size

	meta, _, err := body.object("metadata")
	if err != nil {
		return nil, err
	}
	outMeta := map[string]any{}
	req["metadata"] = outMeta

	res, err := meta.enum("resolution", multiImageResolutions, "2K")
	if err != nil {
		return nil, err
	}
	outMeta["resolution"] = res

	opo, _, err := meta.object("optimize_prompt_options")
	if err != nil {
		return nil, err
	}
	mode, err := opo.enum("mode", []string{"standard", "fast"}, "standard")
	if err != nil {
		return nil, err
	}
	outMeta["optimize_prompt_options"] = map[string]any{"mode": mode}

	seq, err := meta.enum("sequential_image_generation", []string{"disabled", "auto"}, "disabled")
	if err != nil {
		return nil, err
	}
	if n > 1 {
		seq = "auto"
	}
	outMeta["sequential_image_generation"] = seq

	seqOpts, _, err := meta.object("sequential_image_generation_options")
	if err != nil {
		return nil, err
	}
	maxImages, hasMax, err := seqOpts.integer("max_images")
	if err != nil {
		return nil, err
	}
	if hasMax && (maxImages < 1 || maxImages > MultiImageMaxN) {
		return nil, invalid(seqOpts.path("max_images"), "%s must be between 1 and %d (got %d)", seqOpts.path("max_images"), MultiImageMaxN, maxImages)
	}
	maxOutputs := int(n)
	if seq == "auto" {
		if !hasMax {
			maxImages = n
		}
		if total := len(urls) + int(maxImages); total > MultiImageMaxTotal {
			return nil, invalid(seqOpts.path("max_images"), "reference images plus generated images must total at most %d (image_urls has %d, %s is %d)", MultiImageMaxTotal, len(urls), seqOpts.path("max_images"), maxImages)
		}
		outMeta["sequential_image_generation_options"] = map[string]any{"max_images": int(maxImages)}
		maxOutputs = max(maxOutputs, int(maxImages))
	}

	watermark, err := meta.boolean("watermark", true)
	if err != nil {
		return nil, err
	}
	outMeta["watermark"] = watermark

	if opts.ImageProbe != nil && len(urls) > 0 {
		if err := probeReferenceImages(ctx, opts.ImageProbe, "image_urls", urls); err != nil {
			return nil, err
		}
	}

	out := &Normalized{
		Model:           model,
		Request:         req,
		N:               int(n),
		MaxOutputs:      maxOutputs,
		ReferenceImages: len(urls),
		Size:            size,
		Resolution:      res,
	}
	out.Width, out.Height, _ = MultiImagePixelSize(size, res)
	return out, nil
}

// probeReferenceImages fetches every distinct reference image concurrently
// and checks the multi-image family's limits; the error of the lowest index
// wins.
func probeReferenceImages(ctx context.Context, probe ImageProbe, key string, urls []string) *ValidationError {
	results := map[string]*probeResult{}
	var wg sync.WaitGroup
	for _, u := range urls {
		if _, dup := results[u]; dup {
			continue
		}
		r := &probeResult{}
		results[u] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx, probe, u)
		}()
	}
	wg.Wait()
	for i, u := range urls {
		if err := results[u].check(indexPath(key, i)); err != nil {
			return err
		}
	}
	return nil
}

type probeResult struct {
	w, h   int
	format string
	size   int64
	err    error
}

func (r *probeResult) run(ctx context.Context, probe ImageProbe, u string) {
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("probe failed: %v", p)
		}
	}()
	r.w, r.h, r.format, r.size, r.err = probe(ctx, u)
}

func (r *probeResult) check(path string) *ValidationError {
	w, h, format, size := r.w, r.h, r.format, r.size
	if r.err != nil {
		return invalid(path, "%s could not be downloaded or read as an image: %s", path, clip(r.err.Error()))
	}
	switch format {
	case "jpeg", "jpg", "png":
	default:
		if format == "" {
			format = "unknown"
		}
		return invalid(path, "%s must be a jpeg or png image (got %s)", path, clip(format))
	}
	if size > MultiImageRefMaxBytes {
		return invalid(path, "%s must be at most 10MB (got %s)", path, byteSize(size))
	}
	if w < MultiImageRefMinSide || h < MultiImageRefMinSide {
		return invalid(path, "%s width and height must be greater than 14 px (got %dx%d)", path, w, h)
	}
	if int64(w)*int64(h) > MultiImageRefMaxPixels {
		return invalid(path, "%s must be at most 6000x6000 pixels in total (got %dx%d)", path, w, h)
	}
	if 3*int64(w) < int64(h) || int64(w) > 3*int64(h) {
		return invalid(path, "%s width/height ratio must be between 1/3 and 3 (got %dx%d)", path, w, h)
	}
	return nil
}

func byteSize(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
