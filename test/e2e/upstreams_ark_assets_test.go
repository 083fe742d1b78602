package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
	"github.com/modelgate/modelgate/gateway/upstream/ark"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// seedanceSubmissions are the content arrays Seedance received.
func seedanceSubmissions(fake *fakeupstream.Ark) [][]map[string]any {
	var out [][]map[string]any
	for _, r := range fake.Requests() {
		if r.Method != http.MethodPost || r.Path != ark.PathTasks {
			continue
		}
		var body struct {
			Content []map[string]any `json:"content"`
		}
		_ = json.Unmarshal(r.Body, &body)
		out = append(out, body.Content)
	}
	return out
}

// mediaURL is a content item's media URL ("" for text).
func mediaURL(item map[string]any) string {
	for _, k := range []string{"image_url", "video_url", "audio_url"} {
		if m, ok := item[k].(map[string]any); ok {
			u, _ := m["url"].(string)
			return u
		}
	}
	return ""
}

var _ = Describe("Ark's private asset library", func() {
	// TestArkAssetLibraryReview: on an Ark channel with an asset group,
	// private asset review hands the library signed links to the reviewed
	// copies (signed OpenAPI calls the fake verifies), waits for the assets
	// to turn Active, and Seedance receives their asset:// references, never
	// a URL; the task is billed exactly (5 s out, 6 s of reference video
	// read from the file). A second task reuses the library's assets. An
	// asset the library fails fails its task before any video is submitted,
	// with nothing charged.
	It("reviews assets in the library, sends Seedance asset:// references and charges nothing for a rejected asset", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewArk()
		t.Cleanup(fake.Close)
		fake.SetLibraryPlan(fakeupstream.ArkLibraryPlan{Processing: 2})
		input := v1.Decimal("0.10")
		model := vendorModel{prefix: "seedance-lib", provider: "ark", baseURL: fake.URL, upstream: "doubao-seedance-2-0-260128", key: fake.Key(),
			secret: map[string]string{ark.KeyAccessKeyID: fake.AccessKeyID(), ark.KeySecretAccessKey: fake.SecretAccessKey()},
			typ:    v1.ModelTypeVideo, profile: v1.ProfileAllInOneVideo, review: true,
			options: map[string]string{ark.OptionAssetGroupID: fake.AssetGroup(), ark.OptionAssetEndpoint: fake.URL,
				ark.OptionAssetPoll: "250ms"},
			price: v1.PriceRuleSpec{ChargeType: v1.ChargePerSecond, PriceBasis: v1.BasisOutputSeconds, Unit: v1.UnitSecond,
				UnitPrice: "0.05", InputUnitPrice: &input}}.declare(t)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		clip := uploadstest.Movie("isom", 6, 256, false)
		cat, bad := uploadstest.PNG(32, 32), uploadstest.PNG(40, 24)
		host := newAssetHost(t, map[string][]byte{"/clip.mp4": clip, "/cat.png": cat, "/bad.png": bad})
		body := func(image string) string {
			return fmt.Sprintf(`{"model":%q,"prompt":"the cat walks in","duration":5,"ratio":"16:9","private_asset_review":true,
				"reference_images":[%q],"video_with_roles":[{"url":%q,"role":"reference_video"}]}`,
				model, host.URL+image, host.URL+"/clip.mp4")
		}

		task := finalTask(t, acct.Key, "videos", body("/cat.png"))
		g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
		sent := seedanceSubmissions(fake)
		g.Expect(sent).To(HaveLen(1))
		g.Expect(sent[0]).To(HaveLen(3), "the prompt, the reference image and the reference video")
		refs := map[string][]byte{}
		for i, want := range map[int][]byte{1: cat, 2: clip} {
			ref := mediaURL(sent[0][i])
			g.Expect(ref).To(HavePrefix("asset://"), "Seedance receives the library's reference, never a URL")
			status, libURL, fetched := fake.Asset(strings.TrimPrefix(ref, "asset://"))
			g.Expect(status).To(Equal("Active"))
			g.Expect(libURL).To(HavePrefix(stack.BaseURL), "the library was given a link to the gateway's copy")
			g.Expect(fetched).To(Equal(want), "the library fetched the bytes review copied")
			refs[ref] = want
		}
		g.Expect(sent[0][1]["role"]).To(Equal("reference_image"))
		g.Expect(sent[0][2]["role"]).To(Equal("reference_video"))
		g.Expect(host.fetched("/clip.mp4")).To(Equal(1), "the tenant's URL is fetched once, by the review copy")
		g.Expect(task.Billing.Status).To(Equal("settled"))
		g.Expect(task.Billing.CostUSD).To(Equal("0.85"), "5 s out at 0.05 USD and 6 s in at 0.10 USD")
		ledgerUsed(t, acct, 425000)

		// The task's review round records the references.
		obj := &v1.GenerationTask{}
		g.Expect(stack.Client.Get(context.Background(), client.ObjectKey{Namespace: acct.Namespace, Name: tasks.ObjectName(task.ID)}, obj)).To(Succeed())
		g.Expect(obj.Status.ReviewRounds).To(HaveLen(1))
		for _, a := range obj.Status.ReviewRounds[0].Assets {
			g.Expect(refs).To(HaveKey(a.UpstreamRef), "%+v", a)
			g.Expect(a.State).To(Equal(v1.ReviewPassed))
		}

		// The same assets again: the ledger's records (and their references) are reused.
		again := finalTask(t, acct.Key, "videos", body("/cat.png"))
		g.Expect(again.Status).To(Equal("completed"), "%+v", again.Error)
		g.Expect(fake.Assets()).To(Equal(2), "no new library asset")
		g.Expect(seedanceSubmissions(fake)[1]).To(Equal(sent[0]))
		ledgerUsed(t, acct, 850000)

		// An asset the library fails: the task fails unbilled, nothing reaches Seedance.
		fake.RejectContent(bad)
		failed := finalTask(t, acct.Key, "videos", body("/bad.png"))
		g.Expect(failed.Status).To(Equal("failed"))
		g.Expect(failed.Error.Message).To(ContainSubstring("private asset review rejected the image asset " + host.URL + "/bad.png"))
		g.Expect(failed.Billing.Status).To(Equal("refunded"))
		ledgerUsed(t, acct, 850000)
		g.Expect(seedanceSubmissions(fake)).To(HaveLen(2))
	})
})
