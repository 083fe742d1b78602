// Video tasks on Veo through the Gemini API: a long-running operation.
//
// Submit: POST {baseURL}/{apiVersion}/models/{model}:predictLongRunning,
// x-goog-api-key, body {"instances":[{"prompt", "image", "lastFrame",
// "referenceImages":[{"image","referenceType":"asset"}]}], "parameters":
// {"aspectRatio", "durationSeconds", "resolution", "personGeneration",
// "sampleCount"}}, images as {"bytesBase64Encoded","mimeType"} (the API
// takes no URLs but its own files). The answer is an operation {"name":
// "models/{model}/operations/{id}"}, whose name is the upstream task ID.
//
// Poll: GET {baseURL}/{apiVersion}/{name}: {"done": false} (or no done)
// is running, without progress (operations report none); done with
// "error" {code, message} failed; done with "response":
// {"generateVideoResponse": {"generatedSamples": [{"video": {"uri"}}],
// "raiMediaFilteredCount", "raiMediaFilteredReasons"}} completed, the video
// downloaded from its uri (a files/{id}:download URL that needs the key)
// and handed to the controller as bytes. Samples filtered by Google's
// responsible-AI checks are a content refusal.
//
// Cancel: the Gemini API offers no cancel for Veo operations (Vertex AI's
// :cancel is not served there), so the provider is no upstream.Canceler; a
// deleted task's operation finishes on its own, unbilled to the tenant.

package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Video defaults and limits.
const (
	// DefaultVideoTimeout bounds one exchange but the download.
	DefaultVideoTimeout = 60 * time.Second
	// DefaultVideoDownloadTimeout bounds the download of a finished video.
	DefaultVideoDownloadTimeout = 10 * time.Minute
	// MaxVideoBytes bounds a downloaded video.
	MaxVideoBytes = 512 << 20
	// MaxVideoReferences is the most reference images Veo 3.1 takes.
	MaxVideoReferences = 3
	// DefaultDurations are the clip lengths of Veo 3 and 3.1 (the backend
	// option "durations" lists others, e.g. "5,6,7,8" for Veo 2).
	DefaultDurations = "4,6,8"
)

// operationName is what a Veo operation's name looks like; anything else
// is not put in a URL that carries the key.
var operationName = regexp.MustCompile(`^models/[A-Za-z0-9._-]+/operations/[A-Za-z0-9._-]+$`)

type videoRequest struct {
	Prompt         string `json:"prompt"`
	Duration       *int64 `json:"duration"`
	Ratio          string `json:"ratio"`
	AspectRatio    string `json:"aspect_ratio"`
	Resolution     string `json:"resolution"`
	ImageWithRoles []struct {
		URL  string `json:"url"`
		Role string `json:"role"`
	} `json:"image_with_roles"`
	ReferenceImages []string          `json:"reference_images"`
	VideoList       []json.RawMessage `json:"video_list"`
	VideoWithRoles  []json.RawMessage `json:"video_with_roles"`
	AudioWithRoles  []json.RawMessage `json:"audio_with_roles"`
	Metadata        struct {
		Media []json.RawMessage `json:"media"`
	} `json:"metadata"`
}

type veoImage struct {
	BytesBase64Encoded string `json:"bytesBase64Encoded"`
	MimeType           string `json:"mimeType"`
}

type veoReference struct {
	Image         veoImage `json:"image"`
	ReferenceType string   `json:"referenceType"`
}

type veoInstance struct {
	Prompt          string         `json:"prompt,omitempty"`
	Image           *veoImage      `json:"image,omitempty"`
	LastFrame       *veoImage      `json:"lastFrame,omitempty"`
	ReferenceImages []veoReference `json:"referenceImages,omitempty"`
}

type veoParameters struct {
	AspectRatio      string `json:"aspectRatio,omitempty"`
	DurationSeconds  int64  `json:"durationSeconds,omitempty"`
	Resolution       string `json:"resolution,omitempty"`
	PersonGeneration string `json:"personGeneration,omitempty"`
	SampleCount      int    `json:"sampleCount"`
}

type veoRequest struct {
	Instances  []veoInstance `json:"instances"`
	Parameters veoParameters `json:"parameters"`
}

// operation is a google.longrunning.Operation of Veo.
type operation struct {
	Name  string `json:"name"`
	Done  bool   `json:"done"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Response *struct {
		GenerateVideoResponse struct {
			GeneratedSamples []struct {
				Video struct {
					URI          string `json:"uri"`
					EncodedVideo string `json:"encodedVideo"`
					Encoding     string `json:"encoding"`
				} `json:"video"`
			} `json:"generatedSamples"`
			RaiMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
			RaiMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
		} `json:"generateVideoResponse"`
	} `json:"response"`
}

// veoPlan is a video request mapped onto Veo's parameters, before the
// images are fetched.
type veoPlan struct {
	params      veoParameters
	first, last string
	references  []string
}

func (p *Provider) submitVideo(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	plan, err := planVideo(c)
	if err != nil {
		return upstream.Submitted{}, err
	}
	model := strings.TrimPrefix(c.Model(), "models/")
	if model == "" || strings.ContainsAny(model, "/?#") {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (gemini) has no usable upstream model %q", c.Backend.Name, model)
	}
	var in videoRequest
	_ = json.Unmarshal(c.Request, &in) // planVideo read it already
	inst := veoInstance{Prompt: in.Prompt}
	left := int64(MaxInlineBytes)
	fetch := func(u string) (*veoImage, error) {
		ref, err := upstream.FetchReference(ctx, p.downloads, u, left)
		if err != nil {
			return nil, err
		}
		left -= int64(len(ref.Data))
		return &veoImage{BytesBase64Encoded: base64.StdEncoding.EncodeToString(ref.Data), MimeType: ref.MIMEType}, nil
	}
	if plan.first != "" {
		if inst.Image, err = fetch(plan.first); err != nil {
			return upstream.Submitted{}, err
		}
	}
	if plan.last != "" {
		if inst.LastFrame, err = fetch(plan.last); err != nil {
			return upstream.Submitted{}, err
		}
	}
	for _, u := range plan.references {
		img, err := fetch(u)
		if err != nil {
			return upstream.Submitted{}, err
		}
		inst.ReferenceImages = append(inst.ReferenceImages, veoReference{Image: *img, ReferenceType: "asset"})
	}
	body, _ := json.Marshal(veoRequest{Instances: []veoInstance{inst}, Parameters: plan.params})
	x, err := p.exchange(ctx, c, http.MethodPost, base(c.Backend)+"/models/"+url.PathEscape(model)+":predictLongRunning", body, true, DefaultVideoTimeout)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var op operation
	if err := json.Unmarshal(x.Body, &op); err != nil || !operationName.MatchString(op.Name) {
		// Something may have been accepted that we cannot name: moving to
		// another backend could generate (and be charged) twice.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream accepted the video without a usable operation name", Err: err}
	}
	return upstream.Submitted{ID: op.Name}, nil
}

// planVideo maps the all-in-one-video request onto Veo: what Veo cannot
// make is Unsupported (another backend may).
func planVideo(c upstream.Call) (veoPlan, error) {
	var in videoRequest
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return veoPlan{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	name := c.Backend.Name
	if len(in.VideoList) > 0 || len(in.VideoWithRoles) > 0 || len(in.AudioWithRoles) > 0 || len(in.Metadata.Media) > 0 {
		return veoPlan{}, upstream.Unsupported("backend %q (gemini) cannot take reference videos, audio, files or links", name)
	}
	var plan veoPlan
	for _, r := range in.ImageWithRoles {
		switch r.Role {
		case "first_frame":
			plan.first = r.URL
		case "last_frame":
			plan.last = r.URL
		default:
			plan.references = append(plan.references, r.URL)
		}
	}
	plan.references = append(plan.references, in.ReferenceImages...)
	if len(plan.references) > MaxVideoReferences {
		return veoPlan{}, upstream.Unsupported("backend %q (gemini) takes at most %d reference images", name, MaxVideoReferences)
	}
	for _, u := range append([]string{plan.first, plan.last}, plan.references...) {
		if strings.HasPrefix(u, "asset://") {
			return veoPlan{}, upstream.Unsupported("backend %q (gemini) cannot take asset:// references", name)
		}
	}
	o := c.Backend.Options
	p := veoParameters{SampleCount: 1, PersonGeneration: o["personGeneration"]}
	ratio := in.Ratio
	if ratio == "" {
		ratio = in.AspectRatio
	}
	switch ratio {
	case "", "adaptive":
	case "16:9", "9:16":
		p.AspectRatio = ratio
	default:
		return veoPlan{}, upstream.Unsupported("backend %q (gemini): Veo makes 16:9 and 9:16 videos, not %s", name, ratio)
	}
	p.Resolution = strings.ToLower(in.Resolution)
	if v := o["resolution"]; v != "" {
		p.Resolution = v
	}
	switch p.Resolution {
	case "", "720p", "1080p", "4k":
	default:
		return veoPlan{}, upstream.Unsupported("backend %q (gemini): Veo makes 720p, 1080p and 4k videos, not %s", name, p.Resolution)
	}
	secs, err := durationSeconds(in, c, p.Resolution, len(plan.references) > 0)
	if err != nil {
		return veoPlan{}, upstream.Unsupported("backend %q (gemini): %s", name, err)
	}
	p.DurationSeconds = secs
	plan.params = p
	return plan, nil
}

// durationSeconds is the clip length to ask for: the shortest of the
// backend's durations that covers the request (the tenant is billed for
// what it asked, at most what was made), the longest when the model
// decides. Veo 3.1 makes 1080p and 4k videos, and videos from reference
// images, only at its longest length.
func durationSeconds(in videoRequest, c upstream.Call, resolution string, refs bool) (int64, error) {
	list := c.Backend.Options["durations"]
	if list == "" {
		list = DefaultDurations
	}
	var allowed []int64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("option durations %q is not a list of seconds", list)
		}
		allowed = append(allowed, v)
	}
	longest := allowed[0]
	for _, v := range allowed {
		longest = max(longest, v)
	}
	want := c.DurationSeconds
	if in.Duration != nil {
		want = *in.Duration
	}
	if want <= 0 || resolution == "1080p" || resolution == "4k" || refs {
		if want > longest {
			return 0, fmt.Errorf("the model makes videos of at most %d seconds", longest)
		}
		return longest, nil
	}
	best := int64(0)
	for _, v := range allowed {
		if v >= want && (best == 0 || v < best) {
			best = v
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("the model makes videos of at most %d seconds", longest)
	}
	return best, nil
}

func (p *Provider) pollVideo(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if !operationName.MatchString(id) {
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "the task's operation name is not a Veo operation"}
	}
	x, err := p.exchange(ctx, c, http.MethodGet, base(c.Backend)+"/"+id, nil, false, DefaultVideoTimeout)
	if err != nil {
		return upstream.Status{}, err
	}
	var op operation
	if err := json.Unmarshal(x.Body, &op); err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's operation is not valid JSON", Err: err}
	}
	if !op.Done {
		// Operations carry no progress: the task stays in_progress at 0.
		return upstream.Status{State: upstream.Running, RetryAfter: upstream.ParseRetryAfter(x.Header.Get("Retry-After"), time.Now())}, nil
	}
	if e := op.Error; e != nil {
		st := upstream.Status{State: upstream.Failed, ErrorMessage: e.Message}
		if st.ErrorMessage == "" {
			st.ErrorMessage = fmt.Sprintf("the upstream failed the video (code %d)", e.Code)
		}
		if isPolicyMessage(e.Message) {
			st.ErrorCode = upstream.CodePolicy
		}
		return st, nil
	}
	if op.Response == nil {
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream finished the operation without a response"}, nil
	}
	r := op.Response.GenerateVideoResponse
	if len(r.GeneratedSamples) == 0 {
		if r.RaiMediaFilteredCount > 0 || len(r.RaiMediaFilteredReasons) > 0 {
			msg := "the upstream filtered the video for its content"
			if len(r.RaiMediaFilteredReasons) > 0 {
				msg += ": " + strings.Join(r.RaiMediaFilteredReasons, "; ")
			}
			return upstream.Status{State: upstream.Failed, ErrorCode: upstream.CodePolicy, ErrorMessage: msg}, nil
		}
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream finished the video without a sample"}, nil
	}
	v := r.GeneratedSamples[0].Video
	var out upstream.Output
	switch {
	case v.URI != "":
		data, ctype, err := p.downloadVideo(ctx, c, v.URI)
		if err != nil {
			return upstream.Status{}, err
		}
		out = upstream.Output{Data: data, ContentType: ctype}
	case v.EncodedVideo != "":
		data, err := base64.StdEncoding.DecodeString(v.EncodedVideo)
		if err != nil || len(data) == 0 {
			return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "the upstream's inline video is not valid base64", Err: err}
		}
		out = upstream.Output{Data: data, ContentType: v.Encoding}
	default:
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream's video sample has neither a URI nor bytes"}, nil
	}
	// Veo makes exactly the length asked for and reports none: the
	// length is the one the submission sent.
	plan, err := planVideo(c)
	if err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "the task's request no longer maps onto the backend", Err: err}
	}
	return upstream.Status{State: upstream.Succeeded, Progress: 100, VideoSeconds: plan.params.DurationSeconds,
		Outputs: []upstream.Output{out}}, nil
}

// downloadVideo reads a finished video. A URI on the backend's own host
// (the API's files/{id}:download?alt=media) needs the key and is read with
// the platform's client, the key dropped on any redirect to another host;
// any other URI (a signed storage link) is read without the key through
// the provider's downloads client, public addresses only. A failure is Transient: the
// controller polls again, and the next poll downloads again.
func (p *Provider) downloadVideo(ctx context.Context, c upstream.Call, uri string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultVideoDownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil || (req.URL.Scheme != "https" && req.URL.Scheme != "http") {
		return nil, "", &upstream.Error{Class: upstream.Permanent, Message: "the upstream's video URI is not an http(s) URL", Err: err}
	}
	client := p.downloads
	if sameHost(c.Backend, req.URL) {
		if k := strings.TrimSpace(c.Backend.APIKey); k != "" {
			req.Header.Set("x-goog-api-key", k)
		}
		client = keyClient(p.client)
	}
	resp, err := client.Do(req)
	if errors.Is(err, netguard.ErrForbidden) {
		return nil, "", &upstream.Error{Class: upstream.Permanent, Message: "the upstream's video URI's address is not allowed: " + netguard.Reason(err)}
	}
	if err != nil {
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the video could not be downloaded",
			Err: errors.New(netguard.Reason(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, "", statusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}, false)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxVideoBytes+1))
	switch {
	case err != nil:
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the video download was cut off"}
	case len(data) > MaxVideoBytes:
		return nil, "", &upstream.Error{Class: upstream.Permanent, Message: "the upstream's video is too large"}
	case len(data) == 0:
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the upstream's video is empty"}
	}
	ctype := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ctype, "video/") {
		ctype = "video/mp4"
	}
	return data, ctype, nil
}

// sameHost reports whether u is on the backend's API host (scheme, host and
// port), where the key may go.
func sameHost(b upstream.Backend, u *url.URL) bool {
	root := b.BaseURL
	if root == "" {
		root = DefaultBaseURL
	}
	bu, err := url.Parse(root)
	return err == nil && bu.Scheme == u.Scheme && strings.EqualFold(bu.Host, u.Host)
}

// keyClient is client following at most five redirects and dropping the
// key on a redirect off the original host (Go keeps custom headers across
// hosts; only Authorization and cookies are dropped).
func keyClient(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if !strings.EqualFold(req.URL.Host, via[0].URL.Host) || req.URL.Scheme != via[0].URL.Scheme {
			req.Header.Del("x-goog-api-key")
		}
		return nil
	}
	return &c
}
