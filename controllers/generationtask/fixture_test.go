package generationtask_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/controllers/internal/tasktest"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/builtin"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// The specs drive the task and webhook reconcilers step by step with a fake
// clock, on a fake API client and the suite's real ledger: each It starts
// from setUp's fresh tenant, token, route and reconcilers.

const (
	ns        = "tenant-tasks"
	delay     = 10 * time.Second
	retention = time.Hour
	price     = "0.04" // USD per image
)

var (
	clk      *clocktesting.FakeClock
	c        client.Client
	r        *generationtask.Reconciler
	recorded *events.FakeRecorder
	copies   *fakeCopier
	userID   int64
	tokenID  int64
	seq      int
	hooks    *generationtask.WebhookReconciler
)

// setUp is every spec's BeforeEach.
func setUp() {
	seq++
	var err error
	userID, err = ledger.EnsureTenant(ctx, fmt.Sprintf("gt-tenant-%d-%d", GinkgoRandomSeed(), seq), ns, "acct")
	Expect(err).NotTo(HaveOccurred())
	tokenID, err = ledger.EnsureToken(ctx, store.TokenSpec{UID: fmt.Sprintf("gt-token-%d-%d", GinkgoRandomSeed(), seq),
		UserID: userID, Name: "key", RemainQuota: billing.QuotaPerUSD})
	Expect(err).NotTo(HaveOccurred())
	_, err = ledger.ApplyGrant(ctx, userID, "g", billing.QuotaPerUSD)
	Expect(err).NotTo(HaveOccurred())

	clk = clocktesting.NewFakeClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "modelgate-system"},
		Spec: v1.ModelRouteSpec{Model: "img", Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileMultiImage,
			Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Options: map[string]string{"delay": delay.String()}},
				{Name: "real", Provider: "anthropic"}}},
	}
	scheme := runtime.NewScheme()
	Expect(v1.AddToScheme(scheme)).To(Succeed())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	c = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.GenerationTask{}).WithObjects(route).Build()
	blobs, err := blob.OpenLocal(blob.Config{Dir: GinkgoT().TempDir(), SigningKey: []byte("0123456789abcdef0123"),
		BaseURL: func() string { return "http://files.test" }})
	Expect(err).NotTo(HaveOccurred())
	recorded = events.NewFakeRecorder(100)
	copies = &fakeCopier{}
	r = &generationtask.Reconciler{Client: c, Ledger: ledger, Upstreams: builtin.Registry(upstream.Egress{}), Blobs: blobs, Clock: clk,
		Retention: retention, Events: recorded, Copier: copies}
	// The webhook receivers listen on loopback, as
	// --allow-private-networks=127.0.0.1/32,::1 would allow.
	loopback := &netguard.Guard{}
	loopback.AllowLoopback()
	hooks = &generationtask.WebhookReconciler{Client: c, Blobs: r.Blobs, Clock: clk, Events: recorded,
		Webhooks: webhook.NewSender(loopback, "")}
}

// submit does what the gateway does: reserve, then create the task.
func submit(prompt string, n int64, backends ...string) *v1.GenerationTask {
	t, err := tasktest.Submit(ctx, c, ledger, tasktest.Task{Namespace: ns, RouteNamespace: "modelgate-system",
		Request: fmt.Sprintf(`{"prompt":%q,"n":%d,"size":"1:1"}`, prompt, n), N: n, UnitPrice: price,
		Backends: backends, TokenID: tokenID, UserID: userID, Accepted: clk.Now()})
	Expect(err).NotTo(HaveOccurred())
	return t
}

func step(t *v1.GenerationTask) ctrl.Result {
	res, err := tasktest.Step(ctx, r, c, t)
	Expect(err).NotTo(HaveOccurred())
	return res
}

func balance() store.TokenBalance {
	b, err := ledger.TokenUsage(ctx, tokenID)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// hook runs one reconcile of the webhook controller on t and reads t back.
func hook(t *v1.GenerationTask) ctrl.Result {
	res, err := tasktest.Step(ctx, hooks, c, t)
	Expect(err).NotTo(HaveOccurred())
	return res
}

// fakeCopier "copies" every URL except one containing "unusable", which it
// refuses as an empty file, and records what it copied.
type fakeCopier struct {
	mu     sync.Mutex
	copied []string
}

func (f *fakeCopier) Copy(_ context.Context, _, rawURL, keyBase string) (uploads.Object, error) {
	if strings.Contains(rawURL, "unusable") {
		return uploads.Object{}, &assetcopy.Refusal{Message: "the image asset is empty"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copied = append(f.copied, rawURL)
	return uploads.Object{Key: keyBase + ".png", MimeType: "image/png", Size: 1}, nil
}

func (f *fakeCopier) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.copied...)
}

// drainEvents returns the events recorded since the last call.
func drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-recorded.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// staleReads is a client whose reads of obj's key return obj as it was: a
// cache that has not caught up with the API server.
type staleReads struct {
	client.Client
	obj *v1.GenerationTask
}

func (s staleReads) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	if t, ok := out.(*v1.GenerationTask); ok && key == client.ObjectKeyFromObject(s.obj) {
		s.obj.DeepCopyInto(t)
		return nil
	}
	return s.Client.Get(ctx, key, out, opts...)
}

// countingMedia is the simulated media backend, counting submissions.
type countingMedia struct {
	simulated.Media
	submits atomic.Int32
}

func (m *countingMedia) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	m.submits.Add(1)
	return m.Media.Submit(ctx, c)
}
