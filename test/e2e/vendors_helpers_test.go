package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// vendorModel is a media model on one vendor backend behind a fake.
type vendorModel struct {
	prefix, provider  string
	baseURL, upstream string
	key               string            // the fake's API key, stored in a Secret
	secret            map[string]string // more keys of that Secret (an access key beside the API key)
	typ               v1.ModelType
	profile           v1.ValidationProfile
	price             v1.PriceRuleSpec
	options           map[string]string // backend options
	review            bool              // the route offers private asset review
}

// declare creates the credential Secret, the route and its price in the
// system namespace, waits until this stack's gateway serves them, and
// returns the model's name.
func (m vendorModel) declare(t testing.TB) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	model := uniqueModel(m.prefix)
	data := map[string]string{"apiKey": m.key}
	for k, v := range m.secret {
		data[k] = v
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-" + model, Namespace: framework.SystemNamespace},
		StringData: data}
	g.Expect(stack.Client.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), secret) })
	b := sim(m.provider, m.provider)
	b.BaseURL, b.UpstreamModel = m.baseURL, m.upstream
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
	b.Options = m.options
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: m.typ, ValidationProfile: m.profile, Backends: []v1.Backend{b},
			PrivateAssetReview: m.review}}
	m.price.Model = v1.ModelID(model)
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: framework.SystemNamespace}, Spec: m.price}
	g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
	g.Expect(stack.Client.Create(ctx, price)).To(Succeed())
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), route)
		_ = stack.Client.Delete(context.Background(), price)
	})
	g.Expect(stack.WaitReady(ctx, route)).To(Succeed())
	g.Expect(stack.WaitReady(ctx, price)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, price)).To(Succeed())
	return model
}

// finalTask submits body to /v1/{family}/generations and polls the task
// until it is final.
func finalTask(t testing.TB, key, family, body string) videoTask {
	t.Helper()
	g := NewWithT(t)
	code, raw := videoCall(t, http.MethodPost, "/v1/"+family+"/generations", key, body)
	g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
	var task videoTask
	g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
	g.Expect(task.ID).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) string {
		code, raw := videoCall(t, http.MethodGet, "/v1/"+family+"/generations/"+task.ID, key, "")
		g.Expect(code).To(Equal(http.StatusOK), "%s", raw)
		task = videoTask{}
		g.Expect(json.Unmarshal(raw, &task)).To(Succeed())
		return task.Status
	}, 60*time.Second, 200*time.Millisecond).Should(BeElementOf("completed", "failed"))
	return task
}

// expectRefusedAtSubmission posts a media submission that the upstream
// refuses for content: the POST itself answers 422 content_policy_violation
// with the upstream's message (the submit wait).
func expectRefusedAtSubmission(t testing.TB, key, path, body, message string) {
	t.Helper()
	g := NewWithT(t)
	code, raw := videoCall(t, http.MethodPost, path, key, body)
	g.Expect(code).To(Equal(http.StatusUnprocessableEntity), "%s", raw)
	var refused struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	g.Expect(json.Unmarshal(raw, &refused)).To(Succeed())
	g.Expect(refused.Error.Type).To(Equal("content_policy_violation"))
	g.Expect(refused.Error.Message).To(ContainSubstring(message))
}

// expectStoredOutput checks a completed task's one output: served from the
// gateway's store byte for byte (the fake's default output of its kind),
// not from the upstream's short-lived URL, and settled at costUSD.
func expectStoredOutput(t testing.TB, task videoTask, upstreamURL, kind, costUSD string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(task.Status).To(Equal("completed"), "%+v", task.Error)
	g.Expect(task.Result.Data).To(HaveLen(1))
	resp, err := http.Get(task.Result.Data[0].URL)
	g.Expect(err).NotTo(HaveOccurred())
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	want, _ := fakeupstream.DefaultOutput(kind, 0)
	g.Expect(got).To(Equal(want), "the gateway serves the stored copy")
	g.Expect(task.Result.Data[0].URL).NotTo(HavePrefix(upstreamURL), "not the upstream's short-lived URL")
	g.Expect(task.Billing.Status).To(Equal("settled"))
	g.Expect(task.Billing.CostUSD).To(Equal(costUSD))
}
