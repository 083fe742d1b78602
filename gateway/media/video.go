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
	// imageFields is the order in which the image field of a request is
	// selected (the contract's private asset review names it): the first
	// nonempty one wins; fields are not merged.
	imageFields = []string{"image_with_roles", "reference_images", "image_urls", "images", "image"}
	// imageRoles are the roles of image_with_roles items.
	imageRoles = []string{RoleFirstFrame, RoleLastFrame, RoleReferenceImage}
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
	review bool
	// withRoles are the image_with_roles items in request order (roles
	// first_frame, last_frame, reference_image); images the other image
	// fields by name (reference_images, image_urls, images, image).
	withRoles []mediaRef
	images    map[string][]mediaRef
	// selected are the images of the image field the request uses: the
	// first nonempty one of imageFields; the others are ignored.
	selected   []mediaRef
	videos     []mediaRef // video_list: the model's own field, outside review scope
	roleVideos []mediaRef // video_with_roles: reviewed
	audios     []mediaRef
	media      []mediaRef // role holds the item type (file or link)
	vidSecs    float64
	audSecs    float64
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

	if err := v.readImageRoles(body); err != nil {
		return nil, err
	}
	if err := v.readImages(body); err != nil {
		return nil, err
	}
	v.selected = selectImages(v.withRoles, v.images)
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

	if err := v.checkFrames(); err != nil {
		return nil, err
	}
	frames, refImages := v.frames(), v.referenceImages()
	refVideos := len(v.videos) + len(v.roleVideos)
	hasMedia := len(v.selected)+refVideos+len(v.audios)+len(v.media) > 0
	if _, ok := req["prompt"]; !ok && !hasMedia {
		return nil, invalid("prompt", "prompt is required when the request has no media assets (image_with_roles, reference_images, video_list, video_with_roles, audio_with_roles or metadata.media)")
	}

	out := &Normalized{
		Model:              model,
		Request:            req,
		N:                  1,
		MaxOutputs:         1,
		ReferenceImages:    len(refImages),
		FrameImages:        len(frames),
		ReferenceVideos:    refVideos,
		ReferenceAudios:    len(v.audios),
		HasVideoInput:      refVideos > 0,
		HasAudioInput:      len(v.audios) > 0,
		InputVideoSeconds:  v.vidSecs,
		InputAudioSeconds:  v.audSecs,
		ListVideoSeconds:   totalSeconds(v.videos),
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

// readImageRoles reads image_with_roles: items {url, role} with role
// first_frame, last_frame or reference_image (required); at most one first
// and one last frame, a last frame only with a first frame, and at most
// VideoMaxRefImages reference images. Frames mixed with reference images are
// refused by the combination rule (checkFrames).
func (v *videoRequest) readImageRoles(body fields) *ValidationError {
	items, err := body.objectArray("image_with_roles")
	if err != nil {
		return err
	}
	seen := map[string]int{}
	for _, it := range items {
		ref, err := v.requiredImage(it, "url")
		if err != nil {
			return err
		}
		if _, ok := it.get("role"); !ok {
			return invalid(it.path("role"), "%s is required: first_frame, last_frame or reference_image", it.path("role"))
		}
		role, err := it.enum("role", imageRoles, "")
		if err != nil {
			return err
		}
		if role != RoleReferenceImage && seen[role] > 0 {
			return invalid(it.path("role"), "image_with_roles may contain at most one %s", role)
		}
		seen[role]++
		ref.role = role
		v.withRoles = append(v.withRoles, ref)
	}
	if n := seen[RoleReferenceImage]; n > VideoMaxRefImages {
		return invalid("image_with_roles", "image_with_roles may contain at most %d reference_image items (got %d)", VideoMaxRefImages, n)
	}
	if seen[RoleLastFrame] > 0 && seen[RoleFirstFrame] == 0 {
		return invalid("image_with_roles", "image_with_roles: last_frame requires a first_frame; a last frame alone is not accepted")
	}
	return nil
}

// image validates one image value: a URL, or with review on also inline
// data (raw base64 or a data:image URI, which review allows for images
// only), which is decoded and validated here and stored by the gateway.
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

// readImages reads the image fields other than image_with_roles.
// reference_images is the family's field; image_urls, images and image are
// accepted as other spellings (the review's field precedence names them).
// Each field is validated (under review an asset:// reference is refused in
// every media field, selected or not), but only the selected one is used
// (selectImages).
func (v *videoRequest) readImages(body fields) *ValidationError {
	for _, key := range imageFields[1:] {
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
	return nil
}

// selectImages applies the field precedence: the images come from the
// first nonempty of image_with_roles, reference_images, image_urls, images,
// image. Fields are not merged: the others are neither reviewed nor
// forwarded.
func selectImages(withRoles []mediaRef, images map[string][]mediaRef) []mediaRef {
	if len(withRoles) > 0 {
		return withRoles
	}
	for _, key := range imageFields[1:] {
		if l := images[key]; len(l) > 0 {
			return l
		}
	}
	return nil
}

// frames are the selected first and last frames.
func (v *videoRequest) frames() []mediaRef {
	var out []mediaRef
	for _, r := range v.selected {
		if r.role != RoleReferenceImage {
			out = append(out, r)
		}
	}
	return out
}

// referenceImages are the selected reference images.
func (v *videoRequest) referenceImages() []mediaRef {
	var out []mediaRef
	for _, r := range v.selected {
		if r.role == RoleReferenceImage {
			out = append(out, r)
		}
	}
	return out
}

// checkFrames applies the model's combination rule: first/last frames are
// exclusive with every other media input: reference images (role
// reference_image, or any other image field; the model rejects mixed image
// fields even where the precedence alone would select image_with_roles),
// reference videos, reference audio, files and web links.
func (v *videoRequest) checkFrames() *ValidationError {
	frames := v.frames()
	if len(frames) == 0 {
		return nil
	}
	mixed := len(frames) < len(v.selected) || len(v.videos)+len(v.roleVideos)+len(v.audios)+len(v.media) > 0
	for _, key := range imageFields[1:] {
		mixed = mixed || len(v.images[key]) > 0
	}
	if mixed {
		return invalid("image_with_roles", "%s (first_frame and last_frame cannot be combined with reference images, video_list, video_with_roles, audio_with_roles or metadata.media)", MixedFramesMessage)
	}
	return nil
}

// readVideos reads the reference videos: video_list items {video_url,
// duration?} (the model's field, outside review scope) and video_with_roles
// items {url, role?, duration?} (the review field; role fixed
// reference_video, the default). Both are reference videos, so the model's
// limits (at most 5, given durations at most 15 s in total) apply to them
// together.
func (v *videoRequest) readVideos(body fields) *ValidationError {
	list, err := body.objectArray("video_list")
	if err != nil {
		return err
	}
	roleItems, err := body.objectArray("video_with_roles")
	if err != nil {
		return err
	}
	param, names := "video_list", "video_list"
	switch {
	case len(list) == 0 && len(roleItems) > 0:
		param, names = "video_with_roles", "video_with_roles"
	case len(list) > 0 && len(roleItems) > 0:
		param, names = "video_with_roles", "video_list and video_with_roles"
	}
	if n := len(list) + len(roleItems); n > VideoMaxRefVideos {
		return invalid(param, "%s must contain at most %d videos (got %d)", names, VideoMaxRefVideos, n)
	}
	for _, it := range list {
		ref, err := v.video(it, "video_url")
		if err != nil {
			return err
		}
		v.videos = append(v.videos, ref)
	}
	for _, it := range roleItems {
		ref, err := v.video(it, "url")
		if err != nil {
			return err
		}
		if _, err := it.enum("role", []string{RoleReferenceVideo}, RoleReferenceVideo); err != nil {
			return err
		}
		v.roleVideos = append(v.roleVideos, ref)
	}
	if v.vidSecs > VideoMaxRefSeconds {
		return invalid(param, "%s durations must total at most %d seconds (got %s)", names, VideoMaxRefSeconds, fmtSecs(v.vidSecs))
	}
	return nil
}

// video reads one reference video: its URL (http or https only: inline
// data is allowed for images alone) and its optional duration.
func (v *videoRequest) video(it fields, key string) (mediaRef, *ValidationError) {
	u, err := v.requiredURL(it, key)
	if err != nil {
		return mediaRef{}, err
	}
	secs, err := itemDuration(it)
	if err != nil {
		return mediaRef{}, err
	}
	v.vidSecs += secs
	return mediaRef{path: it.path(key), url: u, role: RoleReferenceVideo, secs: secs}, nil
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

// reviewAssets applies the private asset review rules: the images of the
// selected image field, the videos of video_with_roles and the audio of
// audio_with_roles, in that order; video_list is outside review scope. URLs
// must not embed credentials; a URL used with two types is rejected; a
// repeated URL of one type is reused.
func (v *videoRequest) reviewAssets() ([]ReviewAsset, *ValidationError) {
	type typed struct {
		typ AssetType
		ref mediaRef
	}
	var refs []typed
	for _, r := range v.selected {
		refs = append(refs, typed{AssetImage, r})
	}
	for _, r := range v.roleVideos {
		refs = append(refs, typed{AssetVideo, r})
	}
	for _, r := range v.audios {
		refs = append(refs, typed{AssetAudio, r})
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

// write puts the validated media fields into the normalized request: of the
// image fields only the selected one, its frames as image_with_roles and its
// reference images (whichever field or role they came in) as
// reference_images, the model's field; video_list and video_with_roles
// apart (video_with_roles is the reviewed field, video_list is outside
// review scope); audio_with_roles; metadata.media.
func (v *videoRequest) write(req map[string]any) {
	if frames := v.frames(); len(frames) > 0 {
		list := make([]any, 0, len(frames))
		for _, f := range frames {
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
	if len(v.roleVideos) > 0 {
		req["video_with_roles"] = roleList(v.roleVideos, RoleReferenceVideo)
	}
	if len(v.audios) > 0 {
		req["audio_with_roles"] = roleList(v.audios, RoleReferenceAudio)
	}
	if len(v.media) > 0 {
		list := make([]any, 0, len(v.media))
		for _, r := range v.media {
			list = append(list, map[string]any{"type": r.role, "url": r.url})
		}
		req["metadata"] = map[string]any{"media": list}
	}
}

// roleList is the normalized form of a video_with_roles or audio_with_roles
// list: {url, role, duration?} items.
func roleList(refs []mediaRef, role string) []any {
	list := make([]any, 0, len(refs))
	for _, r := range refs {
		item := map[string]any{"url": r.url, "role": role}
		if r.secs > 0 {
			item["duration"] = r.secs
		}
		list = append(list, item)
	}
	return list
}

func fmtSecs(s float64) string {
	return strings.TrimRight(strings.TrimRight(strconvFloat(s), "0"), ".") + " s"
}

// totalSeconds sums the declared durations of refs.
func totalSeconds(refs []mediaRef) float64 {
	var total float64
	for _, r := range refs {
		total += r.secs
	}
	return total
}
