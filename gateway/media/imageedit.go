package media

import "context"

// ImageEditMaxRefs is the image-edit family's reference image limit.
const ImageEditMaxRefs = 1

// Image-edit size values and limits.
const (
	SizeMatchInputImage = "match_input_image"
	ImageEditMinSafety  = 0
	ImageEditMaxSafety  = 6
	ImageEditSafetyDef  = 2
)

var imageEditSizes = append([]string{SizeMatchInputImage}, ratiosExtended...)

func validateImageEdit(_ context.Context, body fields, _ Options) (*Normalized, *ValidationError) {
	// n is not a field of this family (one image per request); a value
	// other than 1 is rejected rather than silently ignored.
	req, model, err := oneImagePrologue(body)
	if err != nil {
		return nil, err
	}

	urls, err := body.imageURLs("image_urls", ImageEditMaxRefs)
	if err != nil {
		return nil, err
	}
	if len(urls) > 0 {
		req["image_urls"] = urls
	}

	def := "16:9"
	if len(urls) > 0 {
		def = SizeMatchInputImage
	}
	size, err := body.enum("size", imageEditSizes, def)
	if err != nil {
		return nil, err
	}
	if size == SizeMatchInputImage && len(urls) == 0 {
		return nil, invalid("size", "size match_input_image is for image editing only and requires an image in image_urls")
	}
	req["size"] = size

	meta, _, err := body.object("metadata")
	if err != nil {
		return nil, err
	}
	outMeta := map[string]any{}
	req["metadata"] = outMeta
	format, err := meta.enum("response_format", []string{"png", "jpg"}, "png")
	if err != nil {
		return nil, err
	}
	outMeta["response_format"] = format
	tol := int64(ImageEditSafetyDef)
	if v, ok, err := meta.integer("safety_tolerance"); err != nil {
		return nil, err
	} else if ok {
		if v < ImageEditMinSafety || v > ImageEditMaxSafety {
			return nil, invalid("metadata.safety_tolerance", "metadata.safety_tolerance must be between %d and %d (got %d)", ImageEditMinSafety, ImageEditMaxSafety, v)
		}
		tol = v
	}
	outMeta["safety_tolerance"] = int(tol)
	up, err := meta.boolean("prompt_upsampling", false)
	if err != nil {
		return nil, err
	}
	outMeta["prompt_upsampling"] = up

	return &Normalized{
		Model:           model,
		Request:         req,
		N:               1,
		MaxOutputs:      1,
		ReferenceImages: len(urls),
		Size:            size,
	}, nil
}
