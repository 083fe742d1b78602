// Private (trusted) asset library: Ark's review of Seedance reference
// assets, as the channel's upstream.AssetReviewer.
//
// The library is managed through the Volcengine OpenAPI, not the Ark API:
// POST {assetEndpoint}/?Action={action}&Version=2024-01-01 with a JSON body,
// signed with the account's AK/SK (HMAC-SHA256, service "ark", region
// cn-beijing by default) by the Volcengine SDK's signer. Every answer is
// {"ResponseMetadata": {"RequestId", "Action", "Version", "Service",
// "Region", "Error": {"Code", "Message"}}, "Result": {...}}.
//
// An asset is prepared in two steps: CreateAsset {"GroupId", "URL", "Name",
// "AssetType", "ProjectName"} → {"Id"} hands the library a signed link to
// the gateway's reviewed copy (the library fetches it; the tenant's URL
// never leaves the gateway), and GetAsset {"Id", "ProjectName"} →
// {"Id", "Status", …} is polled until the asset is decided. Once Active,
// Seedance receives "asset://<Id>" in place of the copy.
//
// The public descriptions of the status values disagree (one relay lists
// Active/Inactive, others Processing/Active/Failed), so the mapping is
// lenient and case-insensitive: Processing and Pending are pending, Active
// has passed, Failed, Inactive and Rejected are rejected; any other value
// is an error (asked again until the round's deadline). No failure reason
// is read: none is documented consistently.

package ark

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	volc "github.com/volcengine/volc-sdk-golang/base"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Backend options of the asset library.
const (
	// OptionAssetGroupID names the asset group the channel's assets are
	// created in (one group per channel, created once with
	// CreateAssetGroup). Without it the channel has no library and skips
	// private asset review.
	OptionAssetGroupID = "assetGroupId"
	// OptionAssetProject is the Volcengine project of the group (none: the
	// account's default project).
	OptionAssetProject = "assetProjectName"
	// OptionAssetRegion is the region requests are signed for
	// (DefaultAssetRegion).
	OptionAssetRegion = "assetRegion"
	// OptionAssetEndpoint is the OpenAPI root (DefaultAssetEndpoint).
	OptionAssetEndpoint = "assetEndpoint"
	// OptionAssetPoll is how long to wait between GetAsset polls
	// (DefaultAssetPoll).
	OptionAssetPoll = "assetPollInterval"
)

// Keys of the backend's credential Secret holding the Volcengine access
// key, beside the Ark API key the backend's credentialSecretRef names.
const (
	KeyAccessKeyID     = "accessKeyId"
	KeySecretAccessKey = "secretAccessKey"
)

// Asset library defaults and constants.
const (
	DefaultAssetEndpoint = "https://open.volcengineapi.com"
	DefaultAssetRegion   = "cn-beijing"
	DefaultAssetPoll     = 5 * time.Second
	// AssetService and AssetAPIVersion are the OpenAPI service the
	// requests are signed for and the actions' version.
	AssetService    = "ark"
	AssetAPIVersion = "2024-01-01"
	// AssetScheme prefixes a library asset's reference in Seedance content.
	AssetScheme = "asset://"
	// assetBusyWait is the wait after a throttled or failed exchange
	// without a Retry-After.
	assetBusyWait = 10 * time.Second
)

// ReviewsBackend implements upstream.BackendReviewer: only an Ark backend
// with an asset group has a library. The references it returns mean
// something only to Seedance on the same account, so another provider's
// backend has none.
func (Adapter) ReviewsBackend(b upstream.Backend) bool {
	return b.Provider == Name && strings.TrimSpace(b.Options[OptionAssetGroupID]) != ""
}

// Decide implements upstream.AssetReviewer: an asset without a reference
// is created in the channel's group (pending, with its reference); one with
// a reference is looked up and its status mapped. A throttled or failing
// library (429, 5xx, network) leaves the asset pending; a refused
// credential or request is an error.
func (a Adapter) Decide(ctx context.Context, b upstream.Backend, asset upstream.ReviewAsset, _ time.Time) (upstream.ReviewDecision, error) {
	lib, err := newLibrary(ctx, b, a.now, a.Client)
	if err != nil {
		return upstream.ReviewDecision{}, err
	}
	var d upstream.ReviewDecision
	if asset.Ref == "" {
		d, err = lib.create(ctx, asset)
	} else {
		d, err = lib.lookUp(ctx, asset.Ref)
	}
	if busy, ok := errors.AsType[*busyError](err); ok {
		return upstream.ReviewDecision{State: upstream.ReviewPending, Wait: busy.wait, Ref: asset.Ref}, nil
	}
	return d, err
}

// library is one backend's view of the asset library.
type library struct {
	endpoint, group, project string
	creds                    volc.Credentials
	poll, timeout            time.Duration
	now                      func() time.Time
	client                   *http.Client
}

func newLibrary(ctx context.Context, b upstream.Backend, now func() time.Time, client *http.Client) (*library, error) {
	group := strings.TrimSpace(b.Options[OptionAssetGroupID])
	if group == "" {
		return nil, fmt.Errorf("backend %q (ark) has no options.%s", b.Name, OptionAssetGroupID)
	}
	creds, err := accessKey(ctx, b)
	if err != nil {
		return nil, err
	}
	creds.Service, creds.Region = AssetService, optionOr(b, OptionAssetRegion, DefaultAssetRegion)
	lib := &library{endpoint: strings.TrimRight(optionOr(b, OptionAssetEndpoint, DefaultAssetEndpoint), "/"),
		group: group, project: strings.TrimSpace(b.Options[OptionAssetProject]), creds: creds,
		poll: DefaultAssetPoll, timeout: b.TimeoutOr(DefaultTaskTimeout), now: now, client: client}
	if d, err := time.ParseDuration(b.Options[OptionAssetPoll]); err == nil && d > 0 {
		lib.poll = d
	}
	return lib, nil
}

// accessKey reads the Volcengine access key from the backend's Secret.
func accessKey(ctx context.Context, b upstream.Backend) (volc.Credentials, error) {
	if b.SecretKey == nil {
		return volc.Credentials{}, fmt.Errorf("backend %q (ark) has no credential Secret for the asset library's %s and %s", b.Name, KeyAccessKeyID, KeySecretAccessKey)
	}
	id, err := b.SecretKey(ctx, KeyAccessKeyID)
	if err != nil {
		return volc.Credentials{}, fmt.Errorf("backend %q (ark) asset library access key: %w", b.Name, err)
	}
	secret, err := b.SecretKey(ctx, KeySecretAccessKey)
	if err != nil {
		return volc.Credentials{}, fmt.Errorf("backend %q (ark) asset library secret key: %w", b.Name, err)
	}
	return volc.Credentials{AccessKeyID: id, SecretAccessKey: secret}, nil
}

func optionOr(b upstream.Backend, key, def string) string {
	if v := strings.TrimSpace(b.Options[key]); v != "" {
		return v
	}
	return def
}

// assetTypes are the library's AssetType values of the review types.
var assetTypes = map[string]string{"image": "Image", "video": "Video", "audio": "Audio"}

// create hands the library the reviewed copy.
func (l *library) create(ctx context.Context, a upstream.ReviewAsset) (upstream.ReviewDecision, error) {
	typ, ok := assetTypes[a.Type]
	if !ok {
		return upstream.ReviewDecision{}, fmt.Errorf("the Ark asset library takes no %q assets", a.Type)
	}
	if a.CopyURL == "" {
		return upstream.ReviewDecision{}, errors.New("the Ark asset library needs a link to the asset's copy (no blob store signs one)")
	}
	in := struct {
		GroupID     string `json:"GroupId"`
		URL         string `json:"URL"`
		Name        string `json:"Name"`
		AssetType   string `json:"AssetType"`
		ProjectName string `json:"ProjectName,omitempty"`
	}{l.group, a.CopyURL, assetName(a), typ, l.project}
	var out struct {
		ID string `json:"Id"`
	}
	if err := l.call(ctx, "CreateAsset", in, &out); err != nil {
		return upstream.ReviewDecision{}, err
	}
	if out.ID == "" {
		return upstream.ReviewDecision{}, errors.New("the Ark asset library created an asset without an Id")
	}
	return upstream.ReviewDecision{State: upstream.ReviewPending, Wait: l.poll, Ref: AssetScheme + out.ID}, nil
}

// assetName names a library asset after a digest of the asset's key: the
// library shows it in the console, and the tenant's URL stays private.
func assetName(a upstream.ReviewAsset) string {
	sum := sha256.Sum256([]byte(a.Type + "\n" + a.Key))
	return "modelgate-" + hex.EncodeToString(sum[:12])
}

// lookUp polls a created asset.
func (l *library) lookUp(ctx context.Context, ref string) (upstream.ReviewDecision, error) {
	id, ok := strings.CutPrefix(ref, AssetScheme)
	if !ok || id == "" {
		return upstream.ReviewDecision{}, fmt.Errorf("%q is not an Ark asset reference", ref)
	}
	in := struct {
		ID          string `json:"Id"`
		ProjectName string `json:"ProjectName,omitempty"`
	}{id, l.project}
	var out struct {
		ID     string `json:"Id"`
		Status string `json:"Status"`
	}
	if err := l.call(ctx, "GetAsset", in, &out); err != nil {
		return upstream.ReviewDecision{}, err
	}
	state, ok := AssetState(out.Status)
	if !ok {
		return upstream.ReviewDecision{}, fmt.Errorf("the Ark asset library reports an unknown status %q for asset %s", out.Status, id)
	}
	d := upstream.ReviewDecision{State: state, Ref: ref}
	if state == upstream.ReviewPending {
		d.Wait = l.poll
	}
	return d, nil
}

// AssetState maps a library asset's Status to a review state; ok is false
// for a value no source lists.
func AssetState(status string) (state string, ok bool) {
	switch strings.ToLower(strings.TrimSpace(status)) {
	case "processing", "pending":
		return upstream.ReviewPending, true
	case "active":
		return upstream.ReviewPassed, true
	case "failed", "inactive", "rejected":
		return upstream.ReviewRejected, true
	}
	return "", false
}

// busyError is a throttled or unavailable library: ask again after wait.
type busyError struct {
	wait time.Duration
	msg  string
}

func (e *busyError) Error() string { return e.msg }

// openAPIAnswer is the Volcengine OpenAPI envelope.
type openAPIAnswer struct {
	ResponseMetadata struct {
		RequestID string `json:"RequestId"`
		Error     *struct {
			Code    string `json:"Code"`
			Message string `json:"Message"`
		} `json:"Error"`
	} `json:"ResponseMetadata"`
	Result json.RawMessage `json:"Result"`
}

// call sends one signed action and decodes its Result into out.
func (l *library) call(ctx context.Context, action string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	q := url.Values{"Action": {action}, "Version": {AssetAPIVersion}}
	x, err := upstream.TaskRequest{Method: http.MethodPost, URL: l.endpoint + "/?" + q.Encode(), Body: body,
		Timeout: l.timeout, Authorize: func(req *http.Request) { l.creds.Sign(req) }, Client: l.client}.Send(ctx)
	if err != nil {
		if upstream.IsRetryable(err) {
			return &busyError{wait: assetBusyWait, msg: fmt.Sprintf("Ark asset library %s: %v", action, err)}
		}
		return fmt.Errorf("ark asset library %s: %w", action, err)
	}
	var ans openAPIAnswer
	jsonErr := json.Unmarshal(x.Body, &ans)
	code, msg := "", http.StatusText(x.Status)
	if e := ans.ResponseMetadata.Error; e != nil {
		code, msg = e.Code, e.Message
	}
	if busyStatus(x.Status) || busyCode(code) {
		wait := upstream.ParseRetryAfter(x.Header.Get("Retry-After"), l.now())
		if wait <= 0 {
			wait = assetBusyWait
		}
		return &busyError{wait: wait, msg: fmt.Sprintf("ark asset library %s: HTTP %d %s: %s", action, x.Status, code, msg)}
	}
	if !x.OK() || code != "" {
		return fmt.Errorf("ark asset library %s refused the request: HTTP %d %s: %s", action, x.Status, code, msg)
	}
	if jsonErr != nil || len(ans.Result) == 0 {
		return fmt.Errorf("ark asset library %s: the answer has no Result", action)
	}
	if err := json.Unmarshal(ans.Result, out); err != nil {
		return fmt.Errorf("ark asset library %s: the Result is not valid: %w", action, err)
	}
	return nil
}

func busyStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// busyCode reports the Volcengine OpenAPI codes of a throttled or
// temporarily failing service (they may come with HTTP 200 or 400).
func busyCode(code string) bool {
	for _, p := range []string{"RequestLimitExceeded", "FlowLimitExceeded", "Throttling", "TooManyRequests",
		"InternalError", "InternalServiceError", "InternalServiceTimeout", "ServiceUnavailable"} {
		if strings.HasPrefix(code, p) {
			return true
		}
	}
	return false
}

var (
	_ upstream.AssetReviewer   = Adapter{}
	_ upstream.BackendReviewer = Adapter{}
)
