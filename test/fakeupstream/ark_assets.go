package fakeupstream

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	volc "github.com/volcengine/volc-sdk-golang/base"
)

// Ark's private asset library, on the same fake: the Volcengine OpenAPI
// (POST /?Action=…&Version=2024-01-01, written from the relays' pages cited
// in docs/providers.md). Every request must carry a signature the
// Volcengine SDK's signer computes for AccessKeyID()/SecretAccessKey(),
// service "ark", region cn-beijing: the fake signs the same request again
// and compares. Answers are {"ResponseMetadata": {..., "Error": {"Code",
// "Message"}}, "Result": {...}}.
//
// CreateAssetGroup {Name, GroupType, ProjectName} → {Id}; CreateAsset
// {GroupId, URL, Name, AssetType, ProjectName} → {Id}: the fake fetches the
// URL, as the library does, and the asset is Processing for
// ArkLibraryPlan.Processing polls, then Active, or Failed when the URL
// could not be fetched, contains "reject", or serves content marked with
// RejectContent; GetAsset {Id, ProjectName} → the asset. Seedance refuses
// an asset:// reference to an asset that is not Active.

// Credentials of the fake's Volcengine account.
const (
	ArkAccessKeyID     = "AKLTfakeaccesskeyid0123456789"
	ArkSecretAccessKey = "fakeSecretAccessKey0123456789abcdefghij=="
	ArkAssetRegion     = "cn-beijing"
)

// ArkLibraryPlan scripts the asset library.
type ArkLibraryPlan struct {
	// Processing is how many GetAsset polls of a new asset answer
	// Processing before it is decided.
	Processing int
	// Throttled is how many of the next OpenAPI calls answer 429
	// RequestLimitExceeded.
	Throttled int
}

type arkAsset struct {
	id, group, name, url, typ, project, status string
	polls                                      int
	fail                                       bool // decided Failed once processed
	created                                    time.Time
}

type arkLibrary struct {
	plan    ArkLibraryPlan
	groups  map[string]string // id → project
	assets  map[string]*arkAsset
	fetched map[string][]byte // asset id → what its URL served
	reject  [][]byte
}

// AccessKeyID and SecretAccessKey are the Volcengine access key the fake
// accepts.
func (f *Ark) AccessKeyID() string     { return ArkAccessKeyID }
func (f *Ark) SecretAccessKey() string { return ArkSecretAccessKey }

// SetLibraryPlan sets the asset library's script.
func (f *Ark) SetLibraryPlan(p ArkLibraryPlan) {
	f.mu.Lock()
	f.lib.plan = p
	f.mu.Unlock()
}

// AssetGroup creates an asset group in the default project and returns its
// Id, as CreateAssetGroup would.
func (f *Ark) AssetGroup() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newGroup("")
}

func (f *Ark) newGroup(project string) string {
	f.seq++
	id := fmt.Sprintf("group-%s-%05x", time.Now().Format("20060102150405"), f.seq)
	f.lib.groups[id] = project
	return id
}

// RejectContent makes assets whose URL serves exactly data fail.
func (f *Ark) RejectContent(data []byte) {
	f.mu.Lock()
	f.lib.reject = append(f.lib.reject, data)
	f.mu.Unlock()
}

// Asset is a library asset's status, URL and what its URL served ("" status
// for an unknown asset).
func (f *Ark) Asset(id string) (status, url string, fetched []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.lib.assets[id]
	if a == nil {
		return "", "", nil
	}
	return a.status, a.url, f.lib.fetched[id]
}

// Assets counts the assets created.
func (f *Ark) Assets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lib.assets)
}

func openAPIError(w http.ResponseWriter, status int, action, code, msg string) {
	writeJSON(w, status, map[string]any{"ResponseMetadata": map[string]any{
		"RequestId": fmt.Sprintf("2026%016x", time.Now().UnixNano()), "Action": action, "Version": "2024-01-01",
		"Service": "ark", "Region": ArkAssetRegion, "Error": map[string]any{"Code": code, "Message": msg}}})
}

func openAPIResult(w http.ResponseWriter, action string, result any) {
	writeJSON(w, http.StatusOK, map[string]any{"ResponseMetadata": map[string]any{
		"RequestId": fmt.Sprintf("2026%016x", time.Now().UnixNano()), "Action": action, "Version": "2024-01-01",
		"Service": "ark", "Region": ArkAssetRegion}, "Result": result})
}

// openAPI serves the asset library's actions.
func (f *Ark) openAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	action, version := r.URL.Query().Get("Action"), r.URL.Query().Get("Version")
	if r.Method != http.MethodPost {
		openAPIError(w, http.StatusMethodNotAllowed, action, "InvalidHttpMethod", "The HTTP method is not supported for this action.")
		return
	}
	if code, msg := arkVerifySignature(r, body); code != "" {
		status := http.StatusForbidden
		if code == "InvalidAccessKey" || code == "MissingAuthenticationToken" {
			status = http.StatusUnauthorized
		}
		openAPIError(w, status, action, code, msg)
		return
	}
	if version != "2024-01-01" {
		openAPIError(w, http.StatusNotFound, action, "InvalidActionOrVersion", "Could not find operation "+action+" for version "+version+".")
		return
	}
	f.mu.Lock()
	throttled := f.lib.plan.Throttled > 0
	if throttled {
		f.lib.plan.Throttled--
	}
	f.mu.Unlock()
	if throttled {
		openAPIError(w, http.StatusTooManyRequests, action, "RequestLimitExceeded", "Request limit exceeded, please try again later.")
		return
	}
	switch action {
	case "CreateAssetGroup":
		f.createAssetGroup(w, body)
	case "CreateAsset":
		f.createAsset(r.Context(), w, body)
	case "GetAsset":
		f.getAsset(w, body)
	default:
		openAPIError(w, http.StatusNotFound, action, "InvalidActionOrVersion", "Could not find operation "+action+" for version "+version+".")
	}
}

// arkVerifySignature signs the received request again, with the same SDK
// signer and the fake's access key, and compares the Authorization header
// (the X-Date it carries is reused). It answers an OpenAPI error code and
// message, or "" when the signature matches.
func arkVerifySignature(r *http.Request, body []byte) (string, string) {
	auth := r.Header.Get("Authorization")
	if auth == "" || r.Header.Get("X-Date") == "" {
		return "MissingAuthenticationToken", "The request must contain the Authorization and X-Date headers."
	}
	if !strings.Contains(auth, "Credential="+ArkAccessKeyID+"/") {
		return "InvalidAccessKey", "The access key ID you provided does not exist in our records."
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return "InvalidParameter", "The request URL is not valid."
	}
	for k, v := range r.Header {
		if k == "Content-Type" || strings.HasPrefix(k, "X-") {
			again.Header[k] = v
		}
	}
	volc.Credentials{AccessKeyID: ArkAccessKeyID, SecretAccessKey: ArkSecretAccessKey, Service: "ark", Region: ArkAssetRegion}.Sign(again)
	if !hmac.Equal([]byte(again.Header.Get("Authorization")), []byte(auth)) {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
	}
	return "", ""
}

func (f *Ark) createAssetGroup(w http.ResponseWriter, body []byte) {
	var in struct {
		Name        string `json:"Name"`
		ProjectName string `json:"ProjectName"`
	}
	if json.Unmarshal(body, &in) != nil || in.Name == "" {
		openAPIError(w, http.StatusBadRequest, "CreateAssetGroup", "MissingParameter", "The parameter Name is required.")
		return
	}
	f.mu.Lock()
	id := f.newGroup(in.ProjectName)
	f.mu.Unlock()
	openAPIResult(w, "CreateAssetGroup", map[string]any{"Id": id})
}

func (f *Ark) createAsset(ctx context.Context, w http.ResponseWriter, body []byte) {
	var in struct {
		GroupID     string `json:"GroupId"`
		URL         string `json:"URL"`
		Name        string `json:"Name"`
		AssetType   string `json:"AssetType"`
		ProjectName string `json:"ProjectName"`
	}
	if json.Unmarshal(body, &in) != nil {
		openAPIError(w, http.StatusBadRequest, "CreateAsset", "InvalidParameter", "The request body is not valid JSON.")
		return
	}
	switch {
	case in.GroupID == "" || in.URL == "" || in.AssetType == "":
		openAPIError(w, http.StatusBadRequest, "CreateAsset", "MissingParameter", "GroupId, URL and AssetType are required.")
		return
	case in.AssetType != "Image" && in.AssetType != "Video" && in.AssetType != "Audio":
		openAPIError(w, http.StatusBadRequest, "CreateAsset", "InvalidParameter.AssetType", "AssetType must be Image, Video or Audio.")
		return
	case !arkURL(in.URL) || strings.HasPrefix(in.URL, "data:"):
		openAPIError(w, http.StatusBadRequest, "CreateAsset", "InvalidParameter.URL", "URL must be a public HTTP(S) URL.")
		return
	}
	f.mu.Lock()
	project, ok := f.lib.groups[in.GroupID]
	f.mu.Unlock()
	if !ok || project != in.ProjectName {
		openAPIError(w, http.StatusNotFound, "CreateAsset", "NotFound.group_id", "The specified group_id "+in.GroupID+" is not found.")
		return
	}
	data, fetchErr := fetchAsset(ctx, in.URL)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	a := &arkAsset{id: fmt.Sprintf("asset-%s-%05x", time.Now().Format("20060102150405"), f.seq), group: in.GroupID,
		name: in.Name, url: in.URL, typ: in.AssetType, project: in.ProjectName, status: "Processing", created: time.Now(),
		fail: fetchErr != nil || strings.Contains(in.URL, "reject")}
	for _, r := range f.lib.reject {
		a.fail = a.fail || bytes.Equal(r, data)
	}
	f.lib.assets[a.id] = a
	f.lib.fetched[a.id] = data
	openAPIResult(w, "CreateAsset", map[string]any{"Id": a.id})
}

// fetchAsset reads what an asset URL serves, as the library does.
func fetchAsset(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 200<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return data, err
}

func (f *Ark) getAsset(w http.ResponseWriter, body []byte) {
	var in struct {
		ID          string `json:"Id"`
		ProjectName string `json:"ProjectName"`
	}
	if json.Unmarshal(body, &in) != nil || in.ID == "" {
		openAPIError(w, http.StatusBadRequest, "GetAsset", "MissingParameter", "The parameter Id is required.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.lib.assets[in.ID]
	if a == nil || a.project != in.ProjectName {
		openAPIError(w, http.StatusNotFound, "GetAsset", "NotFound.asset", "The specified asset "+in.ID+" is not found.")
		return
	}
	if a.status == "Processing" {
		a.polls++
		if a.polls > f.lib.plan.Processing {
			a.status = "Active"
			if a.fail {
				a.status = "Failed"
			}
		}
	}
	openAPIResult(w, "GetAsset", map[string]any{"Id": a.id, "Name": a.name, "URL": a.url, "AssetType": a.typ,
		"GroupId": a.group, "Status": a.status, "ProjectName": a.project,
		"CreateTime": a.created.UTC().Format(time.RFC3339), "UpdateTime": time.Now().UTC().Format(time.RFC3339)})
}

// inactiveAssets lists the asset:// references of content that name no
// Active asset of the library (Seedance refuses them).
func (f *Ark) inactiveAssets(items []arkContent) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range items {
		for _, u := range []*struct {
			URL string `json:"url"`
		}{c.ImageURL, c.VideoURL, c.AudioURL} {
			if u == nil {
				continue
			}
			if id, ok := strings.CutPrefix(u.URL, "asset://"); ok {
				if a := f.lib.assets[id]; a == nil || a.status != "Active" {
					out = append(out, u.URL)
				}
			}
		}
	}
	return out
}
