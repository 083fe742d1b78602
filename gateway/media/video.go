package media

import (
	"context"
	"math"
	"strings"
)

// Limits of the all-in-one video family.
const (
	VideoDefaultDuration   = 5
	VideoMinDuration       = 2
	VideoMaxDuration       = 30
	VideoDurationAuto      = -1 // the model decides
	VideoMaxRefImages      = 10
	VideoMaxRefVideos      = 5
	VideoMaxRefAudios      = 5
	VideoMaxRefSeconds     = 15 // total of video_list, and of audio_with_roles
	VideoMaxMediaItems     = 1  // metadata.media: one file or one link
	VideoRatioAdaptive     = "adaptive"
	videoDefaultResolution = "1080p"
)

// MixedFramesMessage is the rejection of a request that mixes first/last
// frames with other media inputs.
const MixedFramesMessage = "first/last frames cannot be mixed with reference assets, files or web pages in one request"

var (
	videoRatios      = []string{VideoRatioAdaptive, "16:9", "9:16", "1:1", "4:3", "3:4"}
	videoResolutions = []string{"480p", "720p", "1080p"}
	// reviewImageFields is the order in which private asset review selects
	// the image field (the first nonempty one wins; fields are not merged).
	reviewImageFields = []string{"image_with_roles", "reference_images", "image_urls", "images", "image"}
)

// VideoPixelSize is the nominal output size of a video ratio at a resolution
// tier: the short side is the tier (480, 720 or 1080 px) and the long side
// follows the ratio, rounded to an even number. ok is false for adaptive
// (the ratio follows the input) and unknown values.
func VideoPixelSize(ratio, resolution string) (width, height int, ok bool) {
	short := map[string]int{"480p": 480, "720p": 720, "1080p": 1080}[resolution]
	rw, rh := 0, 0
	switch ratio {
	case "16:9":
		rw, rh = 16, 9
	case "9:16":
		rw, rh = 9, 16
	case "1:1":
		rw, rh = 1, 1
	case "4:3":
		rw, rh = 4, 3
	case "3:4":
		rw, rh = 3, 4
	}
	if short == 0 || rw == 0 {
		return 0, 0, false
	}
	long := func(a, b int) int { return 2 * int(math.Round(float64(short)*float64(a)/float64(b)/2)) }
	if rw >= rh {
		return long(rw, rh), short, true
	}
	return short, long(rh, rw), true
}

// mediaRef is one validated media URL with its JSON path.
type mediaRef struct {
	path string
	url  string
	role string
	secs float64 // duration in seconds, 0 when not given
	// data and mime are set for an inline image (review only); url is then
	// its "sha256:<hex>" key.
	data []byte
	mime string
}

type videoRequest struct {
	review  bool
	frames  []mediaRef
	images  map[string][]mediaRef // by field name: reference_images, image_urls, images, image
	videos  []mediaRef
	audios  []mediaRef
	media   []mediaRef // role holds the item type (file or link)
	vidSecs float64
	audSecs float64
}

func validateVideo(_ context.Context, body fields, opts Options) (*Normalized, *ValidationError) {
	req := map[string]any{}
	model, err := body.model(req)
	if err != nil {
		return nil, err
	}
	if body.has("private_assets") {
		return nil, invalid("private_assets", "private_assets is no longer accepted; it is replaced by the boolean private_asset_review")
	}
	review, err := body.boolean("private_asset_review", false)
	if err != nil {
		return nil, err
	}
	if review && !opts.PrivateAssetReviewEnabled {
		return nil, invalid("private_asset_review", "private_asset_review is not enabled for this model; remove it or ask the platform to enable private asset review")
	}
	req["private_asset_review"] = review
	v := &videoRequest{review: review, images: map[string][]mediaRef{}}

	prompt, _, err := body.str("prompt")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(prompt) != "" {
		req["prompt"] = prompt
	}

	duration := int64(VideoDefaultDuration)
	if d, ok, err := body.integer("duration"); err != nil {
		return nil, err
	} else if ok {
		if d != VideoDurationAuto && (d < VideoMinDuration || d > VideoMaxDuration) {
			return nil, invalid("duration", "duration must be between %d and %d seconds, or -1 to let the model decide (got %d)", VideoMinDuration, VideoMaxDuration, d)
		}
		duration = d
	}
	req["duration"] = int(duration)

	if _, hasRatio := body.get("ratio"); hasRatio {
		if _, hasAlias := body.get("aspect_ratio"); hasAlias {
			return nil, invalid("aspect_ratio", "send either ratio or its alias aspect_ratio, not both")
		}
	}
	ratioKey := "ratio"
	if _, ok := body.get("aspect_ratio"); ok {
		ratioKey = "aspect_ratio"
	}
	ratio, err := body.enum(ratioKey, videoRatios, VideoRatioAdaptive)
	if err != nil {
		return nil, err
	}
	req["ratio"] = ratio

	res, err := body.enum("resolution", videoResolutions, videoDefaultResolution)
	if err != nil {
		return nil, err
	}
	req["resolution"] = res
	audio, err := body.boolean("audio", true)
	if err != nil {
		return nil, err
	}
	req["audio"] = audio
	watermark, err := body.boolean("watermark", false)
	if err != nil {
		return nil, err
	}
	req["watermark"] = watermark
	if seed, ok, err := body.integer("seed"); err != nil {
		return nil, err
	} else if ok {
		req["seed"] = seed
	}

	if err := v.readFrames(body); err != nil {
		return nil, err
	}
	if err := v.readImages(body); err != nil {
		return nil, err
	}
	if err := v.readVideos(body); err != nil {
		return nil, err
	}
	if err := v.readAudios(body); err != nil {
		return nil, err
	}
	meta, _, err := body.object("metadata")
	if err != nil {
		return nil, err
	}
	if err := v.readMedia(meta); err != nil {
		return nil, err
	}

	refImages := v.referenceImages()
	if len(v.frames) > 0 && (len(refImages) > 0 || len(v.videos) > 0 || len(v.audios) > 0 || len(v.media) > 0) {
		return nil, invalid("image_with_roles", "%s (image_with_roles cannot be combined with reference_images, video_list, audio_with_roles or metadata.media)", MixedFramesMessage)
	}
	hasMedia := len(v.frames)+len(refImages)+len(v.videos)+len(v.audios)+len(v.media) > 0
	if _, ok := req["prompt"]; !ok && !hasMedia {
		return nil, invalid("prompt", "prompt is required when the request has no media assets (image_with_roles, reference_images, video_list, audio_with_roles or metadata.media)")
	}

	out := &Normalized{
		Model:              model,
		Request:            req,
		N:                  1,
		MaxOutputs:         1,
		ReferenceImages:    len(refImages),
		FrameImages:        len(v.frames),
		ReferenceVideos:    len(v.videos),
		ReferenceAudios:    len(v.audios),
		HasVideoInput:      len(v.videos) > 0,
		HasAudioInput:      len(v.audios) > 0,
		InputVideoSeconds:  v.vidSecs,
		InputAudioSeconds:  v.audSecs,
		Size:               ratio,
		Resolution:         res,
		Duration:           int(duration),
		Audio:              audio,
		PrivateAssetReview: review,
	}
	out.Width, out.Height, _ = VideoPixelSize(ratio, res)

	if review {
		if !hasMedia {
			return nil, invalid("private_asset_review", "private_asset_review needs media inputs; text-only requests are not supported")
		}
		assets, err := v.reviewAssets()
		if err != nil {
			return nil, err
		}
		out.ReviewAssets = assets
	}

	cbid, err := body.clientBusinessID()
	if err != nil {
		return nil, err
	}
	if cbid != "" {
		req["client_business_id"] = cbid
		out.ClientBusinessID = cbid
	}
	v.write(req)
	return out, nil
}

// url validates one media URL of the request; with review on, asset://
// references are rejected with their own message.
func (v *videoRequest) url(path, raw string) (string, *ValidationError) {
	if v.review && isAssetRef(raw) {
		return "", invalid(path, "%s: asset:// references cannot be used when private_asset_review is true; pass a public http or https URL", path)
	}
	return checkURL(path, raw, !v.review)
}

func (v *videoRequest) readFrames(body fields) *ValidationError {
	items, err := body.objectArray("image_with_roles")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, it := range items {
		ref, err := v.requiredImage(it, "url")
		if err != nil {
			return err
		}
		if _, ok := it.get("role"); !ok {
			return invalid(it.path("role"), "%s is required: first_frame or last_frame", it.path("role"))
		}
		role, err := it.enum("role", []string{RoleFirstFrame, RoleLastFrame}, "")
		if err != nil {
			return err
		}
		if seen[role] {
			return invalid(it.path("role"), "image_with_roles may contain at most one %s", role)
		}
		seen[role] = true
		ref.role = role
		v.frames = append(v.frames, ref)
	}
	if seen[RoleLastFrame] && !seen[RoleFirstFrame] {
		return invalid("image_with_roles", "image_with_roles: last_frame requires a first_frame; a last frame alone is not accepted")
	}
	return nil
}

// image validates one image value: a URL, or with review on also inline
// data (rule 3), which is decoded and validated here and stored by the
// gateway.
func (v *videoRequest) image(path, raw string) (mediaRef, *ValidationError) {
	if v.review && isInline(raw) {
		return decodeInlineImage(path, raw)
	}
	u, err := v.url(path, raw)
	return mediaRef{path: path, url: u}, err
}

func (v *videoRequest) requiredImage(it fields, key string) (mediaRef, *ValidationError) {
	raw, ok, err := it.str(key)
	if err != nil {
		return mediaRef{}, err
	}
	if !ok {
		return mediaRef{}, invalid(it.path(key), "%s is required", it.path(key))
	}
	return v.image(it.path(key), raw)
}

func (v *videoRequest) requiredURL(it fields, key string) (string, *ValidationError) {
	raw, ok, err := it.str(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid(it.path(key), "%s is required", it.path(key))
	}
	return v.url(it.path(key), raw)
}

// readImages reads the reference image fields. reference_images is the
// family's field; image_urls, images and image are accepted as alternative
// spellings (the review rules name them) but only one of them may be set.
func (v *videoRequest) readImages(body fields) *ValidationError {
	var set []string
	for _, key := range reviewImageFields[1:] {
		var list []string
		if key == "image" {
			s, ok, err := body.str(key)
			if err != nil {
				return err
			}
			if ok && strings.TrimSpace(s) != "" {
				list = []string{s}
			}
		} else {
			l, err := body.stringArray(key)
			if err != nil {
				return err
			}
			list = l
		}
		if len(list) == 0 {
			continue
		}
		set = append(set, key)
		if len(list) > VideoMaxRefImages {
			return invalid(key, "%s must contain at most %d image URLs (got %d)", key, VideoMaxRefImages, len(list))
		}
		refs := make([]mediaRef, 0, len(list))
		for i, raw := range list {
			p := indexPath(key, i)
			if key == "image" {
				p = key
			}
			ref, err := v.image(p, raw)
			if err != nil {
				return err
			}
			ref.role = RoleReferenceImage
			refs = append(refs, ref)
		}
		v.images[key] = refs
	}
	if len(set) > 1 {
		return invalid(set[1], "send reference images in one field only (%s); reference_images, image_urls, images and image are not merged", strings.Join(set, " and "))
	}
	return nil
}

// referenceImages is the one nonempty reference image field.
func (v *videoRequest) referenceImages() []mediaRef {
	for _, key := range reviewImageFields[1:] {
		if l := v.images[key]; len(l) > 0 {
			return l
		}
	}
	return nil
}

func (v *videoRequest) readVideos(body fields) *ValidationError {
	items, err := body.objectArray("video_list")
	if err != nil {
		return err
	}
	if len(items) > VideoMaxRefVideos {
		return invalid("video_list", "video_list must contain at most %d videos (got %d)", VideoMaxRefVideos, len(items))
	}
	for _, it := range items {
		u, err := v.requiredURL(it, "video_url")
		if err != nil {
			return err
		}
		secs, err := itemDuration(it)
		if err != nil {
			return err
		}
		v.vidSecs += secs
		v.videos = append(v.videos, mediaRef{path: it.path("video_url"), url: u, role: RoleReferenceVideo, secs: secs})
	}
	if v.vidSecs > VideoMaxRefSeconds {
		return invalid("video_list", "video_list durations must total at most %d seconds (got %s)", VideoMaxRefSeconds, fmtSecs(v.vidSecs))
	}
	return nil
}

func (v *videoRequest) readAudios(body fields) *ValidationError {
	items, err := body.objectArray("audio_with_roles")
	if err != nil {
		return err
	}
	if len(items) > VideoMaxRefAudios {
		return invalid("audio_with_roles", "audio_with_roles must contain at most %d items (got %d)", VideoMaxRefAudios, len(items))
	}
	for _, it := range items {
		u, err := v.requiredURL(it, "url")
		if err != nil {
			return err
		}
		if _, err := it.enum("role", []string{RoleReferenceAudio}, RoleReferenceAudio); err != nil {
			return err
		}
		secs, err := itemDuration(it)
		if err != nil {
			return err
		}
		v.audSecs += secs
		v.audios = append(v.audios, mediaRef{path: it.path("url"), url: u, role: RoleReferenceAudio, secs: secs})
	}
	if v.audSecs > VideoMaxRefSeconds {
		return invalid("audio_with_roles", "audio_with_roles durations must total at most %d seconds (got %s)", VideoMaxRefSeconds, fmtSecs(v.audSecs))
	}
	return nil
}

func itemDuration(it fields) (float64, *ValidationError) {
	secs, ok, err := it.number("duration")
	if err != nil || !ok {
		return 0, err
	}
	if secs <= 0 {
		return 0, invalid(it.path("duration"), "%s must be a positive number of seconds", it.path("duration"))
	}
	return secs, nil
}

func (v *videoRequest) readMedia(meta fields) *ValidationError {
	items, err := meta.objectArray("media")
	if err != nil {
		return err
	}
	types := map[string]bool{}
	for _, it := range items {
		if _, ok := it.get("type"); !ok {
			return invalid(it.path("type"), "%s is required: file or link", it.path("type"))
		}
		typ, err := it.enum("type", []string{"file", "link"}, "")
		if err != nil {
			return err
		}
		u, err := v.requiredURL(it, "url")
		if err != nil {
			return err
		}
		types[typ] = true
		v.media = append(v.media, mediaRef{path: it.path("url"), url: u, role: typ})
	}
	if types["file"] && types["link"] {
		return invalid("metadata.media", "metadata.media cannot combine a file with a web link; send at most one file or one link per request")
	}
	if len(items) > VideoMaxMediaItems {
		return invalid("metadata.media", "metadata.media may contain at most one file or one link per request (got %d items)", len(items))
	}
	return nil
}

// reviewAssets applies the private asset review rules: images from the first
// nonempty image field in review order (not merged), audio from
// audio_with_roles; video_list is outside review scope. URLs must not embed
// credentials; a URL used with two types is rejected; a repeated URL of one
// type is reused.
func (v *videoRequest) reviewAssets() ([]ReviewAsset, *ValidationError) {
	var refs []struct {
		typ AssetType
		ref mediaRef
	}
	images := selectReviewImages(v.frames, v.images)
	for _, r := range images {
		refs = append(refs, struct {
			typ AssetType
			ref mediaRef
		}{AssetImage, r})
	}
	for _, r := range v.audios {
		refs = append(refs, struct {
			typ AssetType
			ref mediaRef
		}{AssetAudio, r})
	}
	typeOf := map[string]AssetType{}
	var out []ReviewAsset
	for _, e := range refs {
		if hasCredentials(e.ref.url) {
			return nil, invalid(e.ref.path, "%s must not embed credentials (user:password@) when private_asset_review is true", e.ref.path)
		}
		if t, seen := typeOf[e.ref.url]; seen {
			if t != e.typ {
				return nil, invalid(e.ref.path, "%s is used as both %s and %s; the same URL cannot have conflicting types", e.ref.path, t, e.typ)
			}
			continue // reused
		}
		typeOf[e.ref.url] = e.typ
		out = append(out, ReviewAsset{Type: e.typ, URL: e.ref.url, Role: e.ref.role, Data: e.ref.data, MimeType: e.ref.mime})
	}
	return out, nil
}

// selectReviewImages returns the images of the first nonempty field of
// image_with_roles, reference_images, image_urls, images, image.
func selectReviewImages(frames []mediaRef, images map[string][]mediaRef) []mediaRef {
	if len(frames) > 0 {
		return frames
	}
	for _, key := range reviewImageFields[1:] {
		if l := images[key]; len(l) > 0 {
			return l
		}
	}
	return nil
}

// write puts the validated media fields into the normalized request. Other
// image fields are normalized to reference_images.
func (v *videoRequest) write(req map[string]any) {
	if len(v.frames) > 0 {
		list := make([]any, 0, len(v.frames))
		for _, f := range v.frames {
			list = append(list, map[string]any{"url": f.url, "role": f.role})
		}
		req["image_with_roles"] = list
	}
	if refs := v.referenceImages(); len(refs) > 0 {
		list := make([]string, 0, len(refs))
		for _, r := range refs {
			list = append(list, r.url)
		}
		req["reference_images"] = list
	}
	if len(v.videos) > 0 {
		list := make([]any, 0, len(v.videos))
		for _, r := range v.videos {
			item := map[string]any{"video_url": r.url}
			if r.secs > 0 {
				item["duration"] = r.secs
			}
			list = append(list, item)
		}
		req["video_list"] = list
	}
	if len(v.audios) > 0 {
		list := make([]any, 0, len(v.audios))
		for _, r := range v.audios {
			item := map[string]any{"url": r.url, "role": RoleReferenceAudio}
			if r.secs > 0 {
				item["duration"] = r.secs
			}
			list = append(list, item)
		}
		req["audio_with_roles"] = list
	}
	if len(v.media) > 0 {
		list := make([]any, 0, len(v.media))
		for _, r := range v.media {
			list = append(list, map[string]any{"type": r.role, "url": r.url})
		}
		req["metadata"] = map[string]any{"media": list}
	}
}

func fmtSecs(s float64) string {
	return strings.TrimRight(strings.TrimRight(strconvFloat(s), "0"), ".") + " s"
}
