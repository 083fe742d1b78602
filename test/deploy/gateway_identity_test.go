package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/wire"
	"github.com/modelgate/modelgate/test/framework"
)

// TestGatewayRunsUnderItsServiceAccount runs the gateway process itself as
// the chart's gateway ServiceAccount (the controllers run as an admin, as the
// manager would), then creates a key through POST /v1/tokens and submits an
// image task over HTTP: the chart's RBAC is enough for both, and the same
// identity still cannot read a tenant's Secrets.
func TestGatewayRunsUnderItsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	installChartRBAC(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	ledger, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "ledger.db"))
	g.Expect(err).NotTo(HaveOccurred())
	defer ledger.Close()

	gwCfg, gwClient := impersonate(t, "modelgate-gateway")
	g.Eventually(func() error { return gwClient.List(ctx, &v1.ApiTokenList{}) }).
		WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())

	opts := wire.Options{Listen: "127.0.0.1:0", ShutdownGrace: 2 * time.Second, SystemNamespace: SystemNamespace,
		DataDir: dir, BlobSigningKey: []byte("deploy-test-signing-key")}
	var base string
	opts.Blobs, err = wire.OpenBlobs(opts, func() string { return base })
	g.Expect(err).NotTo(HaveOccurred())

	// The manager, as an administrator, and the gateway, as its
	// ServiceAccount (caching Secrets of the system namespace only), each
	// composed as its binary does; they share the blob store.
	mgr, err := wire.NewSystem(ctx, wire.SystemOptions{Config: env.Config, Ledger: ledger, SystemNamespace: SystemNamespace,
		Controllers: &controllers.Options{SyncPeriod: time.Second}, ManagerBlobs: opts})
	g.Expect(err).NotTo(HaveOccurred())
	gw, err := wire.NewSystem(ctx, wire.SystemOptions{Config: gwCfg, Ledger: ledger, SystemNamespace: SystemNamespace,
		Gateway: &opts})
	g.Expect(err).NotTo(HaveOccurred())
	srv := gw.Gateway
	go func() { _ = mgr.Start(ctx) }()
	go func() { _ = gw.Start(ctx) }()
	g.Eventually(srv.Addr).WithTimeout(framework.Timeout).ShouldNot(BeEmpty())
	base = "http://" + srv.Addr()
	g.Eventually(func() int {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(framework.LongTimeout).WithPolling(framework.Interval).Should(Equal(200))

	// An account with a key, and a priced image model, applied by the platform team.
	ns, tenant := tenantNamespace(t)
	tenant.Spec.Grants = []v1.Grant{{ID: "g", Quota: ptr.To[int64](5_000_000)}}
	g.Eventually(func() error {
		cur := &v1.Tenant{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tenant), cur); err != nil {
			return err
		}
		cur.Spec.Grants = tenant.Spec.Grants
		return k8s.Update(ctx, cur)
	}).WithTimeout(framework.Timeout).Should(Succeed())
	tok := &v1.ApiToken{ObjectMeta: metav1.ObjectMeta{Name: "admin-made", Namespace: ns},
		Spec: v1.ApiTokenSpec{DisplayName: "admin made", Quota: ptr.To[int64](2_000_000)}}
	g.Expect(k8s.Create(ctx, tok)).To(Succeed())
	model := "identity-image"
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileSingleImage,
			Backends: []v1.Backend{{Name: "sim", Provider: "simulated"}}}}
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
			Unit: v1.UnitRequest, UnitPrice: "0.03"}}
	g.Expect(k8s.Create(ctx, route)).To(Succeed())
	g.Expect(k8s.Create(ctx, price)).To(Succeed())
	var key string
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tok), tok)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tok.Status.Conditions, v1.ConditionReady)).To(BeTrue())
		s := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: tok.Status.SecretName}, s)).To(Succeed())
		key = string(s.Data[v1.APIKeySecretKey])
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(price), price)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(price.Status.Conditions, v1.ConditionPublished)).To(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
		g.Expect(route.Status.ReadyBackends).To(Equal(int32(1)))
	}).WithTimeout(framework.LongTimeout).WithPolling(framework.Interval).Should(Succeed())

	post := func(path, k string, body any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// Token creation: the gateway's identity creates the ApiToken.
	g.Eventually(func() any {
		_, out := post("/v1/tokens", key, map[string]any{"name": "made by the gateway", "remain_quota": 1_000_000})
		return out["success"]
	}).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(BeTrue())

	// Task submission: the gateway's identity creates the GenerationTask, the
	// manager completes it.
	code, task := post("/v1/images/generations", key, map[string]any{"model": model, "prompt": "a lighthouse"})
	g.Expect(code).To(Equal(200), "%v", task)
	g.Expect(task["status"]).To(Equal("queued"))
	id := task["id"].(string)
	g.Eventually(func() any {
		req, _ := http.NewRequest("GET", base+"/v1/images/generations/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out["status"]
	}).WithTimeout(framework.LongTimeout).WithPolling(framework.Interval).Should(Equal("completed"))

	// And that identity cannot read the tenant's Secrets.
	err = gwClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tenant-key"}, &corev1.Secret{})
	g.Expect(forbidden(err)).To(BeTrue(), "reading a tenant Secret as the gateway: %v", err)
}
