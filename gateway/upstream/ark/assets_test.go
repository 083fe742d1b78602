package ark_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/ark"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// libraryBackend is an Ark backend whose Secret holds the fake's access
// key (secret overrides the secret key) and whose options name a group.
func libraryBackend(f *fakeupstream.Ark, group, secret string) upstream.Backend {
	keys := map[string]string{ark.KeyAccessKeyID: f.AccessKeyID(), ark.KeySecretAccessKey: secret}
	return upstream.Backend{Name: "ark-cn", Provider: ark.Name, BaseURL: f.URL, APIKey: f.Key(),
		Options: map[string]string{ark.OptionAssetGroupID: group, ark.OptionAssetEndpoint: f.URL, ark.OptionAssetPoll: "2s"},
		SecretKey: func(_ context.Context, key string) (string, error) {
			if v, ok := keys[key]; ok {
				return v, nil
			}
			return "", credential.ErrNoKey
		}}
}

// copyHost serves the gateway's reviewed copies.
func copyHost(t *testing.T, files map[string]string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func openAPICalls(f *fakeupstream.Ark) []fakeupstream.Request {
	var out []fakeupstream.Request
	for _, r := range f.Requests() {
		if r.Path == "/" {
			out = append(out, r)
		}
	}
	return out
}

// TestAssetLibraryCreatesThenPolls: an asset without a reference is
// created from its copy's link with a signed CreateAsset (pending, with its
// asset:// reference); polls with the reference follow GetAsset's status
// from Processing to Active.
func TestAssetLibraryCreatesThenPolls(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	f.SetLibraryPlan(fakeupstream.ArkLibraryPlan{Processing: 1})
	copies := copyHost(t, map[string]string{"/copy/clip.mp4": "the reviewed clip"})
	b := libraryBackend(f, f.AssetGroup(), f.SecretAccessKey())
	a := upstream.ReviewAsset{Type: "video", Key: "https://tenant.example/clip.mp4", CopyURL: copies.URL + "/copy/clip.mp4?sig=1"}
	ctx, now := context.Background(), time.Now()

	d, err := ark.New(fakeupstream.Client()).Decide(ctx, b, a, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(upstream.ReviewPending))
	g.Expect(d.Wait).To(Equal(2 * time.Second))
	id, ok := strings.CutPrefix(d.Ref, "asset://")
	g.Expect(ok).To(BeTrue(), d.Ref)
	status, gotURL, fetched := f.Asset(id)
	g.Expect(status).To(Equal("Processing"))
	g.Expect(gotURL).To(Equal(a.CopyURL), "the library is given the copy's link, never the tenant's URL")
	g.Expect(string(fetched)).To(Equal("the reviewed clip"))

	create := openAPICalls(f)[0]
	g.Expect(create.Method).To(Equal(http.MethodPost))
	q, _ := url.ParseQuery(create.Query)
	g.Expect(q.Get("Action")).To(Equal("CreateAsset"))
	g.Expect(q.Get("Version")).To(Equal("2024-01-01"))
	g.Expect(create.Header.Get("Authorization")).To(MatchRegexp(
		`^HMAC-SHA256 Credential=` + f.AccessKeyID() + `/\d{8}/cn-beijing/ark/request, SignedHeaders=\S+, Signature=[0-9a-f]{64}$`))
	var body map[string]any
	g.Expect(json.Unmarshal(create.Body, &body)).To(Succeed())
	g.Expect(body).To(HaveKeyWithValue("AssetType", "Video"))
	g.Expect(body).To(HaveKeyWithValue("URL", a.CopyURL))
	g.Expect(body).NotTo(HaveKey("ProjectName"), "no project option: the account's default")
	g.Expect(body["Name"]).To(HavePrefix("modelgate-"))
	g.Expect(body["Name"]).NotTo(ContainSubstring("tenant.example"))

	a.Ref = d.Ref
	d, err = ark.New(fakeupstream.Client()).Decide(ctx, b, a, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(upstream.ReviewDecision{State: upstream.ReviewPending, Wait: 2 * time.Second, Ref: a.Ref}))
	d, err = ark.New(fakeupstream.Client()).Decide(ctx, b, a, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(upstream.ReviewDecision{State: upstream.ReviewPassed, Ref: a.Ref}))
	g.Expect(f.Assets()).To(Equal(1), "polls never create another asset")
	q, _ = url.ParseQuery(openAPICalls(f)[2].Query)
	g.Expect(q.Get("Action")).To(Equal("GetAsset"))
}

// TestAssetLibraryRejectsAFailedAsset: an asset the library fails (here:
// a link that cannot be fetched) is rejected once processed.
func TestAssetLibraryRejectsAFailedAsset(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	copies := copyHost(t, map[string]string{})
	b := libraryBackend(f, f.AssetGroup(), f.SecretAccessKey())
	a := upstream.ReviewAsset{Type: "image", Key: "sha256:00", CopyURL: copies.URL + "/gone.png"}
	d, err := ark.New(fakeupstream.Client()).Decide(context.Background(), b, a, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	a.Ref = d.Ref
	d, err = ark.New(fakeupstream.Client()).Decide(context.Background(), b, a, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(upstream.ReviewRejected))
	g.Expect(d.Ref).To(Equal(a.Ref))
}

// TestAssetLibraryErrors: throttling leaves the asset pending (its
// reference kept); a wrong secret key, an unknown group and a missing
// access key are errors.
func TestAssetLibraryErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	copies := copyHost(t, map[string]string{"/a.png": "png"})
	group := f.AssetGroup()
	a := upstream.ReviewAsset{Type: "image", Key: "https://tenant.example/a.png", CopyURL: copies.URL + "/a.png"}
	ctx := context.Background()

	f.SetLibraryPlan(fakeupstream.ArkLibraryPlan{Throttled: 1})
	d, err := ark.New(fakeupstream.Client()).Decide(ctx, libraryBackend(f, group, f.SecretAccessKey()), upstream.ReviewAsset{Type: "image", Ref: "asset://asset-1"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(upstream.ReviewDecision{State: upstream.ReviewPending, Wait: 10 * time.Second, Ref: "asset://asset-1"}))

	_, err = ark.New(fakeupstream.Client()).Decide(ctx, libraryBackend(f, group, "not-the-secret"), a, time.Now())
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 403 SignatureDoesNotMatch")))
	_, err = ark.New(fakeupstream.Client()).Decide(ctx, libraryBackend(f, "group-unknown", f.SecretAccessKey()), a, time.Now())
	g.Expect(err).To(MatchError(ContainSubstring("NotFound.group_id")))
	noKey := libraryBackend(f, group, f.SecretAccessKey())
	noKey.SecretKey = func(context.Context, string) (string, error) { return "", credential.ErrNoKey }
	_, err = ark.New(fakeupstream.Client()).Decide(ctx, noKey, a, time.Now())
	g.Expect(err).To(MatchError(credential.ErrNoKey))
	g.Expect(err.Error()).NotTo(ContainSubstring(f.SecretAccessKey()))
	g.Expect(f.Assets()).To(BeZero())
}

func TestAssetState(t *testing.T) {
	g := NewWithT(t)
	for status, want := range map[string]string{"Processing": upstream.ReviewPending, "Pending": upstream.ReviewPending,
		"Active": upstream.ReviewPassed, "ACTIVE": upstream.ReviewPassed, "Failed": upstream.ReviewRejected,
		"Inactive": upstream.ReviewRejected, "Rejected": upstream.ReviewRejected} {
		got, ok := ark.AssetState(status)
		g.Expect(ok).To(BeTrue(), status)
		g.Expect(got).To(Equal(want), status)
	}
	_, ok := ark.AssetState("Archived")
	g.Expect(ok).To(BeFalse())
}

func TestReviewsOnlyBackendsWithAGroup(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ark.New(fakeupstream.Client()).ReviewsBackend(upstream.Backend{Provider: ark.Name, Options: map[string]string{ark.OptionAssetGroupID: "group-1"}})).To(BeTrue())
	g.Expect(ark.New(fakeupstream.Client()).ReviewsBackend(upstream.Backend{Provider: ark.Name})).To(BeFalse(), "without a group the channel has no library")
	g.Expect(ark.New(fakeupstream.Client()).ReviewsBackend(upstream.Backend{Provider: "taskapi", Options: map[string]string{ark.OptionAssetGroupID: "group-1"}})).
		To(BeFalse(), "Ark's references mean nothing to another provider")
}

// TestSeedanceTakesActiveAssetReferences: a content item may name a
// library asset; Seedance takes it once Active and refuses it before.
func TestSeedanceTakesActiveAssetReferences(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	f.SetLibraryPlan(fakeupstream.ArkLibraryPlan{Processing: 1})
	copies := copyHost(t, map[string]string{"/a.png": "png"})
	b := libraryBackend(f, f.AssetGroup(), f.SecretAccessKey())
	a := upstream.ReviewAsset{Type: "image", Key: "https://tenant.example/a.png", CopyURL: copies.URL + "/a.png"}
	d, err := ark.New(fakeupstream.Client()).Decide(context.Background(), b, a, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	c := call(f, upstream.Video, "doubao-seedance-2-0-260128",
		`{"prompt":"the garden","reference_images":["`+d.Ref+`"],"duration":5,"ratio":"16:9"}`, 1)

	_, err = ark.New(fakeupstream.Client()).Submit(context.Background(), c)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent), "an asset still processing is refused")
	a.Ref = d.Ref
	_, _ = ark.New(fakeupstream.Client()).Decide(context.Background(), b, a, time.Now())
	d, err = ark.New(fakeupstream.Client()).Decide(context.Background(), b, a, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(upstream.ReviewPassed))
	sub, err := ark.New(fakeupstream.Client()).Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.ID).NotTo(BeEmpty())
	last := f.Requests()[len(f.Requests())-1]
	g.Expect(string(last.Body)).To(ContainSubstring(`{"type":"image_url","image_url":{"url":"` + d.Ref + `"},"role":"reference_image"}`))
}
