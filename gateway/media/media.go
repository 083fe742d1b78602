package media

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

// ImageProbe fetches enough of a remote image to report its pixel size,
// format ("jpeg", "png", or another lower-case name for formats the caller
// cannot decode) and size in bytes. err means the image could not be
// downloaded or read.
type ImageProbe func(ctx context.Context, url string) (width, height int, format string, size int64, err error)

// Options are the route-level settings and injected dependencies of Validate.
type Options struct {
	// PrivateAssetReviewEnabled is the route's switch
	// (ModelRouteSpec.PrivateAssetReview); without it a request asking for
	// private_asset_review is rejected.
	PrivateAssetReviewEnabled bool

	// ImageProbe, when set, is used by the multi-image family to check its
	// reference images (format, ratio, pixel size, byte size). When nil those
	// remote checks are skipped.
	ImageProbe ImageProbe
}

// AssetType is the type of a media asset under private asset review.
type AssetType string

// Asset types.
const (
	AssetImage AssetType = "image"
	AssetVideo AssetType = "video"
	AssetAudio AssetType = "audio"
)

// Asset roles under private asset review.
const (
	RoleFirstFrame     = "first_frame"
	RoleLastFrame      = "last_frame"
	RoleReferenceImage = "reference_image"
	RoleReferenceVideo = "reference_video"
	RoleReferenceAudio = "reference_audio"
)

// ReviewAsset is one asset that must pass private asset review before the
// video is submitted. URLs are trimmed; an asset appears once per type and
// URL (a repeated URL is reused with the role of its first use).
//
// An inline image (base64 or a data URI) has URL "sha256:<hex>" of its
// decoded content, which Data holds (MimeType is its sniffed type); the
// normalized request carries the same key in its place until the gateway
// stores Data and substitutes the stored object's reference.
type ReviewAsset struct {
	Type     AssetType `json:"type"`
	URL      string    `json:"url"`
	Role     string    `json:"role"`
	Data     []byte    `json:"-"`
	MimeType string    `json:"-"`
}

// Normalized is an accepted request: the request with defaults applied and
// unknown fields dropped, plus the facts billing and the task controller need.
type Normalized struct {
	// Profile is the family the request was validated against.
	Profile v1alpha1.ValidationProfile `json:"profile"`
	// Model is the model field of the body ("" when absent; routing chose
	// the model before validation).
	Model string `json:"model,omitempty"`
	// Request is the normalized request body to store in the GenerationTask
	// (spec.request). Marshal it with RequestJSON.
	Request map[string]any `json:"request"`

	// N is the number of outputs requested: the pre-deduction count (the
	// multi-image family pre-deducts by n; every other family produces one).
	N int `json:"n"`
	// MaxOutputs is the most outputs the request can produce (for the
	// multi-image family max(n, sequential max_images); otherwise N).
	MaxOutputs int `json:"maxOutputs"`
	// ReferenceImages counts reference images (image_urls for image families,
	// reference_images for video).
	ReferenceImages int `json:"referenceImages"`
	// FrameImages counts first/last frame images (video).
	FrameImages int `json:"frameImages,omitempty"`
	// ReferenceVideos and ReferenceAudios count video_list and
	// audio_with_roles items (video).
	ReferenceVideos int `json:"referenceVideos,omitempty"`
	ReferenceAudios int `json:"referenceAudios,omitempty"`
	// HasVideoInput is true when the request carries input video.
	HasVideoInput bool `json:"hasVideoInput,omitempty"`
	// HasAudioInput is true when the request carries input audio.
	HasAudioInput bool `json:"hasAudioInput,omitempty"`
	// InputVideoSeconds and InputAudioSeconds total the durations given
	// for video_list and audio_with_roles items (0 when none were given).
	InputVideoSeconds float64 `json:"inputVideoSeconds,omitempty"`
	InputAudioSeconds float64 `json:"inputAudioSeconds,omitempty"`
	// ListVideoSeconds is the part of InputVideoSeconds from video_list,
	// the video field outside private asset review.
	ListVideoSeconds float64 `json:"listVideoSeconds,omitempty"`

	// Size is the normalized size or aspect ratio ("" when the model chooses).
	Size string `json:"size,omitempty"`
	// Resolution is the normalized resolution tier (1K/2K/4K, 480p/720p/1080p).
	Resolution string `json:"resolution,omitempty"`
	// Width and Height are the requested output size in pixels where it can be
	// derived from size and resolution; 0 otherwise.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Duration is the requested video length in seconds (-1 = the model
	// decides); 0 for images.
	Duration int `json:"duration,omitempty"`
	// Audio is true when the video is generated with sound.
	Audio bool `json:"audio,omitempty"`

	// ClientBusinessID is the caller's business identifier ("" when absent).
	ClientBusinessID string `json:"clientBusinessID,omitempty"`
	// PrivateAssetReview is the request's private_asset_review flag.
	PrivateAssetReview bool `json:"privateAssetReview,omitempty"`
	// ReviewAssets are the assets to review, in selection order, when
	// PrivateAssetReview is true.
	ReviewAssets []ReviewAsset `json:"reviewAssets,omitempty"`
}

// RequestJSON is the normalized request body as JSON (keys sorted).
func (n *Normalized) RequestJSON() ([]byte, error) {
	return json.Marshal(n.Request)
}

// Validate checks body against the rules of profile and returns the
// normalized request, or a ValidationError saying what to fix.
func Validate(profile v1alpha1.ValidationProfile, body []byte, opts Options) (*Normalized, *ValidationError) {
	return ValidateContext(context.Background(), profile, body, opts)
}

// ValidateContext is Validate with a context for the injected ImageProbe.
func ValidateContext(ctx context.Context, profile v1alpha1.ValidationProfile, body []byte, opts Options) (*Normalized, *ValidationError) {
	var family func(context.Context, fields, Options) (*Normalized, *ValidationError)
	switch profile {
	case v1alpha1.ProfileMultiImage:
		family = validateMultiImage
	case v1alpha1.ProfileSingleImage:
		family = validateSingleImage
	case v1alpha1.ProfileImageEdit:
		family = validateImageEdit
	case v1alpha1.ProfileAllInOneVideo:
		family = validateVideo
	default:
		return nil, &ValidationError{
			Status:  http.StatusInternalServerError,
			Type:    ErrTypeInternal,
			Message: "the model's route has no supported validation profile (" + strconv.Quote(clip(string(profile))) + ")",
		}
	}
	m, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	n, err := family(ctx, fields{m: m}, opts)
	if err != nil {
		return nil, err
	}
	n.Profile = profile
	return n, nil
}

func indexPath(p string, i int) string { return p + "[" + strconv.Itoa(i) + "]" }

// Aspect ratios shared by the families.
var (
	ratiosBasic    = []string{"1:1", "4:3", "3:4", "16:9", "9:16", "3:2", "2:3"}
	ratiosExtended = append(append([]string{}, ratiosBasic...), "21:9", "9:21")
)
