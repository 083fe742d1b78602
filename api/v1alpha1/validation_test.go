package v1alpha1_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

func dec(s string) *v1.Decimal { d := v1.Decimal(s); return &d }

func validToken() *v1.ApiToken {
	return &v1.ApiToken{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "tok-"},
		Spec:       v1.ApiTokenSpec{DisplayName: "ci key", Quota: ptr.To[int64](500000)},
	}
}

func validRoute() *v1.ModelRoute {
	return &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "route-"},
		Spec: v1.ModelRouteSpec{
			Model: "demo-chat",
			Backends: []v1.Backend{{
				Name:                "primary",
				Provider:            "openai",
				BaseURL:             "https://upstream.example.com/v1",
				CredentialSecretRef: &v1.SecretKeyRef{Name: "upstream", Key: "api-key"},
			}},
		},
	}
}

func validPrice() *v1.PriceRule {
	return &v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "price-"},
		Spec: v1.PriceRuleSpec{
			Model: "demo-image", ChargeType: v1.ChargePerRequest,
			PriceBasis: v1.BasisRequest, Unit: v1.UnitRequest, UnitPrice: "0.03",
		},
	}
}

func validTenant() *v1.Tenant {
	return &v1.Tenant{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"},
		Spec:       v1.TenantSpec{Grants: []v1.Grant{{ID: "welcome", Credits: dec("200")}}},
	}
}

func validTask() *v1.GenerationTask {
	return &v1.GenerationTask{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "task-"},
		Spec: v1.GenerationTaskSpec{
			TaskID: "task_abc", Model: "demo-image", Type: v1.ModelTypeImage,
			Profile: v1.ProfileSingleImage, Request: runtime.RawExtension{Raw: []byte(`{"prompt":"a cat"}`)},
			TokenName: "demo", TokenID: 1, UserID: 1, RequestID: "req-1",
		},
	}
}

func validBatch() *v1.Batch {
	return &v1.Batch{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "batch-"},
		Spec: v1.BatchSpec{
			BatchID: "batch_abc", Endpoint: "/v1/chat/completions", InputFileID: "file-abc",
			TokenName: "demo", TokenID: 1, UserID: 1,
		},
	}
}

var _ = Describe("CRD validation", func() {
	var ns string

	BeforeEach(func() {
		n := framework.NewNamespace("validation")
		Expect(k8s.Create(ctx, n)).To(Succeed())
		ns = n.Name
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	})

	// expect creates obj and checks the API server's verdict: accepted when
	// message is empty, otherwise rejected as invalid with message in the text.
	expect := func(obj client.Object, message string) {
		obj.SetNamespace(ns)
		err := k8s.Create(ctx, obj)
		if message == "" {
			Expect(err).NotTo(HaveOccurred())
			return
		}
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(message))
	}

	DescribeTable("ApiToken",
		func(mutate func(*v1.ApiToken), message string) {
			t := validToken()
			mutate(t)
			expect(t, message)
		},
		Entry("a valid token", func(*v1.ApiToken) {}, ""),
		Entry("a 50-character name", func(t *v1.ApiToken) { t.Spec.DisplayName = strings.Repeat("n", 50) }, ""),
		Entry("a 50-character non-ASCII name", func(t *v1.ApiToken) { t.Spec.DisplayName = strings.Repeat("键", 50) }, ""),
		Entry("a 51-character name", func(t *v1.ApiToken) { t.Spec.DisplayName = strings.Repeat("n", 51) },
			"token name must be at most 50 characters"),
		Entry("no name", func(t *v1.ApiToken) { t.Spec.DisplayName = "" }, "spec.displayName"),
		Entry("quota and credits together", func(t *v1.ApiToken) { t.Spec.Credits = dec("10") },
			"set at most one of quota or credits"),
		Entry("credits that are not a number", func(t *v1.ApiToken) { t.Spec.Quota = nil; t.Spec.Credits = dec("ten") },
			"must be a non-negative decimal string"),
		Entry("negative quota", func(t *v1.ApiToken) { t.Spec.Quota = ptr.To[int64](-1) }, "spec.quota"),
		Entry("model limits without the switch", func(t *v1.ApiToken) { t.Spec.ModelLimits = []v1.ModelID{"gpt-4o"} },
			"modelLimits requires modelLimitsEnabled: true"),
		Entry("a key Secret reference without a key", func(t *v1.ApiToken) { t.Spec.KeySecretRef = &v1.SecretKeyRef{Name: "s"} },
			"spec.keySecretRef.key"),
		Entry("one alert of each kind", func(t *v1.ApiToken) {
			t.Spec.DailyQuota, t.Spec.MonthlyQuota = 100000, 1000000
			t.Spec.Alerts = []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](20)}, {RemainingCredits: dec("0.5")},
				{DailyLimitPercent: ptr.To[int32](80)}, {MonthlyLimitPercent: ptr.To[int32](100)}}
		}, ""),
		Entry("an alert with two thresholds", func(t *v1.ApiToken) {
			t.Spec.DailyQuota = 100000
			t.Spec.Alerts = []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](20), DailyLimitPercent: ptr.To[int32](80)}}
		}, "set exactly one of remainingPercent, remainingCredits, dailyLimitPercent or monthlyLimitPercent"),
		Entry("an alert with no threshold", func(t *v1.ApiToken) { t.Spec.Alerts = []v1.ApiTokenAlert{{}} },
			"set exactly one of remainingPercent, remainingCredits, dailyLimitPercent or monthlyLimitPercent"),
		Entry("a daily limit alert without a daily limit", func(t *v1.ApiToken) {
			t.Spec.Alerts = []v1.ApiTokenAlert{{DailyLimitPercent: ptr.To[int32](80)}}
		}, "a dailyLimitPercent alert needs a dailyQuota"),
		Entry("a monthly limit alert without a monthly limit", func(t *v1.ApiToken) {
			t.Spec.DailyQuota = 100000
			t.Spec.Alerts = []v1.ApiTokenAlert{{MonthlyLimitPercent: ptr.To[int32](80)}}
		}, "a monthlyLimitPercent alert needs a monthlyQuota"),
		Entry("a limit alert above 100%", func(t *v1.ApiToken) {
			t.Spec.DailyQuota = 100000
			t.Spec.Alerts = []v1.ApiTokenAlert{{DailyLimitPercent: ptr.To[int32](101)}}
		}, "spec.alerts[0].dailyLimitPercent"),
		Entry("a remaining alert at 100%", func(t *v1.ApiToken) {
			t.Spec.Alerts = []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](100)}}
		}, "spec.alerts[0].remainingPercent"),
		Entry("an alert at 0 credits", func(t *v1.ApiToken) {
			t.Spec.Alerts = []v1.ApiTokenAlert{{RemainingCredits: dec("0.000")}}
		}, "remainingCredits must be more than 0"),
		Entry("the same alert twice", func(t *v1.ApiToken) {
			t.Spec.Alerts = []v1.ApiTokenAlert{{RemainingPercent: ptr.To[int32](20)}, {RemainingPercent: ptr.To[int32](20)}}
		}, "alerts must not repeat a threshold"),
		Entry("nine alerts", func(t *v1.ApiToken) {
			for p := range int32(9) {
				t.Spec.Alerts = append(t.Spec.Alerts, v1.ApiTokenAlert{RemainingPercent: ptr.To(10 + p)})
			}
		}, "spec.alerts: Too many"),
	)

	DescribeTable("ModelRoute",
		func(mutate func(*v1.ModelRoute), message string) {
			r := validRoute()
			mutate(r)
			expect(r, message)
		},
		Entry("a valid route", func(*v1.ModelRoute) {}, ""),
		Entry("a simulated backend without a base URL", func(r *v1.ModelRoute) {
			r.Spec.Backends[0] = v1.Backend{Name: "sim", Provider: "simulated"}
		}, ""),
		Entry("no backends", func(r *v1.ModelRoute) { r.Spec.Backends = nil }, "spec.backends"),
		Entry("a negative weight", func(r *v1.ModelRoute) { r.Spec.Backends[0].Weight = -1 }, "spec.backends[0].weight"),
		Entry("a priority out of range", func(r *v1.ModelRoute) { r.Spec.Backends[0].Priority = 1001 }, "spec.backends[0].priority"),
		Entry("a base URL that is not http", func(r *v1.ModelRoute) { r.Spec.Backends[0].BaseURL = "ftp://x" },
			"baseURL must be an http or https URL"),
		Entry("a remote provider without a base URL", func(r *v1.ModelRoute) { r.Spec.Backends[0].BaseURL = "" },
			"baseURL is required for every provider but the built-in simulated ones"),
		Entry("duplicate backend names", func(r *v1.ModelRoute) { r.Spec.Backends = append(r.Spec.Backends, r.Spec.Backends[0]) },
			"Duplicate value"),
		Entry("an image model without a profile", func(r *v1.ModelRoute) { r.Spec.Type = v1.ModelTypeImage },
			"image and video models need a validationProfile"),
		Entry("a video model with an image profile", func(r *v1.ModelRoute) {
			r.Spec.Type = v1.ModelTypeVideo
			r.Spec.ValidationProfile = v1.ProfileMultiImage
		}, "validationProfile does not fit the model type"),
		Entry("an unknown model type", func(r *v1.ModelRoute) { r.Spec.Type = "hologram" }, "spec.type"),
	)

	DescribeTable("PriceRule",
		func(mutate func(*v1.PriceRule), message string) {
			p := validPrice()
			mutate(p)
			expect(p, message)
		},
		Entry("a valid per-request price", func(*v1.PriceRule) {}, ""),
		Entry("a valid per-token price", func(p *v1.PriceRule) {
			p.Spec.ChargeType, p.Spec.PriceBasis, p.Spec.Unit = v1.ChargePerToken, v1.BasisTotalTokens, v1.Unit1MTokens
		}, ""),
		Entry("a valid peak window", func(p *v1.PriceRule) {
			p.Spec.Timezone = "Asia/Shanghai"
			p.Spec.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Mon"}, Start: "09:00", End: "18:00", Multiplier: dec("1.5")}}
		}, ""),
		Entry("a price of abc", func(p *v1.PriceRule) { p.Spec.UnitPrice = "abc" }, "must be a non-negative decimal string"),
		Entry("a negative price", func(p *v1.PriceRule) { p.Spec.UnitPrice = "-1" }, "must be a non-negative decimal string"),
		Entry("a price in exponent form", func(p *v1.PriceRule) { p.Spec.UnitPrice = "1e3" }, "must be a non-negative decimal string"),
		Entry("per_second with a request basis", func(p *v1.PriceRule) { p.Spec.ChargeType = v1.ChargePerSecond },
			"per_second prices use priceBasis output_seconds and unit second"),
		Entry("per_token with a request unit", func(p *v1.PriceRule) {
			p.Spec.ChargeType, p.Spec.PriceBasis = v1.ChargePerToken, v1.BasisTotalTokens
		}, "per_token prices use priceBasis total_tokens or text_input_tokens and unit 1m_tokens"),
		Entry("a peak window with both multiplier and price", func(p *v1.PriceRule) {
			p.Spec.Timezone = "UTC"
			p.Spec.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "18:00", Multiplier: dec("2"), UnitPrice: dec("1")}}
		}, "exactly one of multiplier or unitPrice must be set"),
		Entry("a peak window at 25:00", func(p *v1.PriceRule) {
			p.Spec.Timezone = "UTC"
			p.Spec.PeakWindows = []v1.PeakWindow{{Start: "25:00", End: "18:00", Multiplier: dec("2")}}
		}, "spec.peakWindows[0].start"),
		Entry("peak windows without a timezone", func(p *v1.PriceRule) {
			p.Spec.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "18:00", Multiplier: dec("2")}}
		}, "peakWindows need a timezone"),
	)

	DescribeTable("Tenant",
		func(mutate func(*v1.Tenant), message string) {
			t := validTenant()
			mutate(t)
			expect(t, message)
		},
		Entry("a valid tenant", func(*v1.Tenant) {}, ""),
		Entry("a grant with credits and quota", func(t *v1.Tenant) { t.Spec.Grants[0].Quota = ptr.To[int64](5) },
			"exactly one of credits or quota must be set"),
		Entry("a grant with neither", func(t *v1.Tenant) { t.Spec.Grants[0].Credits = nil },
			"exactly one of credits or quota must be set"),
		Entry("a grant of abc credits", func(t *v1.Tenant) { t.Spec.Grants[0].Credits = dec("abc") },
			"must be a non-negative decimal string"),
		Entry("two grants with one id", func(t *v1.Tenant) { t.Spec.Grants = append(t.Spec.Grants, t.Spec.Grants[0]) },
			"Duplicate value"),
		Entry("a group with spaces", func(t *v1.Tenant) { t.Spec.Group = "my group" }, "spec.group"),
		Entry("a webhook", func(t *v1.Tenant) { t.Spec.Webhook = validWebhook("https://hooks.example.com/tasks") }, ""),
		Entry("a webhook to an ftp URL", func(t *v1.Tenant) { t.Spec.Webhook = validWebhook("ftp://hooks.example.com/tasks") },
			"url must be an http or https URL"),
		Entry("a webhook without a secret", func(t *v1.Tenant) {
			t.Spec.Webhook = validWebhook("https://hooks.example.com/tasks")
			t.Spec.Webhook.SecretRef = v1.SecretKeyRef{}
		}, "spec.webhook.secretRef.name"),
		Entry("a webhook with 20 attempts", func(t *v1.Tenant) {
			t.Spec.Webhook = validWebhook("https://hooks.example.com/tasks")
			t.Spec.Webhook.MaxAttempts = 20
		}, "spec.webhook.maxAttempts"),
		Entry("alerts on the balance", func(t *v1.Tenant) {
			t.Spec.Alerts = []v1.TenantAlert{{RemainingPercent: ptr.To[int32](20)}, {RemainingCredits: dec("500")}, {RemainingPercent: ptr.To[int32](5)}}
		}, ""),
		Entry("an alert with both thresholds", func(t *v1.Tenant) {
			t.Spec.Alerts = []v1.TenantAlert{{RemainingPercent: ptr.To[int32](20), RemainingCredits: dec("500")}}
		}, "set exactly one of remainingPercent or remainingCredits"),
		Entry("an alert with no threshold", func(t *v1.Tenant) { t.Spec.Alerts = []v1.TenantAlert{{}} },
			"set exactly one of remainingPercent or remainingCredits"),
		Entry("an alert at 0%", func(t *v1.Tenant) { t.Spec.Alerts = []v1.TenantAlert{{RemainingPercent: ptr.To[int32](0)}} },
			"spec.alerts[0].remainingPercent"),
		Entry("an alert at 0 credits", func(t *v1.Tenant) { t.Spec.Alerts = []v1.TenantAlert{{RemainingCredits: dec("0")}} },
			"remainingCredits must be more than 0"),
		Entry("an alert at ten credits in words", func(t *v1.Tenant) { t.Spec.Alerts = []v1.TenantAlert{{RemainingCredits: dec("ten")}} },
			"must be a non-negative decimal string"),
		Entry("the same alert twice", func(t *v1.Tenant) {
			t.Spec.Alerts = []v1.TenantAlert{{RemainingCredits: dec("500")}, {RemainingCredits: dec("500")}}
		}, "alerts must not repeat a threshold"),
		Entry("nine alerts", func(t *v1.Tenant) {
			for p := range int32(9) {
				t.Spec.Alerts = append(t.Spec.Alerts, v1.TenantAlert{RemainingPercent: ptr.To(10 + p)})
			}
		}, "spec.alerts: Too many"),
		Entry("console OIDC groups", func(t *v1.Tenant) {
			t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: []v1.OIDCGroup{"acme-readers"},
				KeyManagerGroups: []v1.OIDCGroup{"acme-admins", "cn=ops,ou=groups,dc=acme,dc=com"}}}
		}, ""),
		Entry("an empty console OIDC group", func(t *v1.Tenant) {
			t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: []v1.OIDCGroup{""}}}
		}, "spec.console.oidc.viewerGroups[0]"),
		Entry("a console OIDC group of 257 characters", func(t *v1.Tenant) {
			t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{KeyManagerGroups: []v1.OIDCGroup{v1.OIDCGroup(strings.Repeat("g", 257))}}}
		}, "spec.console.oidc.keyManagerGroups[0]"),
		Entry("33 console OIDC viewer groups", func(t *v1.Tenant) {
			t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{}}
			for i := range 33 {
				t.Spec.Console.OIDC.ViewerGroups = append(t.Spec.Console.OIDC.ViewerGroups, v1.OIDCGroup(fmt.Sprintf("g%d", i)))
			}
		}, "spec.console.oidc.viewerGroups: Too many"),
		Entry("a console OIDC group twice", func(t *v1.Tenant) {
			t.Spec.Console = &v1.TenantConsole{OIDC: &v1.TenantConsoleOIDC{ViewerGroups: []v1.OIDCGroup{"a", "a"}}}
		}, "Duplicate value"),
	)

	DescribeTable("GenerationTask",
		func(mutate func(*v1.GenerationTask), message string) {
			t := validTask()
			mutate(t)
			expect(t, message)
		},
		Entry("a valid task", func(*v1.GenerationTask) {}, ""),
		Entry("a text task", func(t *v1.GenerationTask) { t.Spec.Type = v1.ModelTypeText }, "spec.type"),
		Entry("no task ID", func(t *v1.GenerationTask) { t.Spec.TaskID = "" }, "spec.taskID"),
		Entry("an unknown profile", func(t *v1.GenerationTask) { t.Spec.Profile = "poster" }, "spec.profile"),
	)

	DescribeTable("Batch",
		func(mutate func(*v1.Batch), message string) {
			b := validBatch()
			mutate(b)
			expect(b, message)
		},
		Entry("a valid batch", func(*v1.Batch) {}, ""),
		Entry("an Anthropic batch", func(b *v1.Batch) { b.Spec.API, b.Spec.Endpoint = "anthropic", "/v1/messages" }, ""),
		Entry("an unknown wire", func(b *v1.Batch) { b.Spec.API = "gemini" }, "spec.api"),
		Entry("an endpoint that is not a text route", func(b *v1.Batch) { b.Spec.Endpoint = "/v1/images/generations" },
			"spec.endpoint"),
		Entry("no input file", func(b *v1.Batch) { b.Spec.InputFileID = "" }, "spec.inputFileID"),
		Entry("no batch ID", func(b *v1.Batch) { b.Spec.BatchID = "" }, "spec.batchID"),
		Entry("a negative concurrency", func(b *v1.Batch) { b.Spec.Concurrency = -1 }, "spec.concurrency"),
		Entry("a concurrency above 64", func(b *v1.Batch) { b.Spec.Concurrency = 65 }, "spec.concurrency"),
		Entry("17 metadata pairs", func(b *v1.Batch) {
			b.Spec.Metadata = map[string]string{}
			for i := range 17 {
				b.Spec.Metadata[strings.Repeat("k", i+1)] = "v"
			}
		}, "spec.metadata"),
	)

	It("defaults a batch's wire, window and concurrency", func() {
		b := validBatch()
		b.Namespace = ns
		Expect(k8s.Create(ctx, b)).To(Succeed())
		Expect(b.Spec.API).To(Equal("openai"))
		Expect(b.Spec.CompletionWindow.Duration).To(Equal(24 * time.Hour))
		Expect(b.Spec.Concurrency).To(Equal(int32(4)))
	})

	It("keeps a batch's spec immutable and takes only known states", func() {
		b := validBatch()
		b.Namespace = ns
		Expect(k8s.Create(ctx, b)).To(Succeed())
		b.Spec.Concurrency = 8
		err := k8s.Update(ctx, b)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec is immutable"))

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		b.Status.State = v1.BatchInProgress
		b.Status.RequestCounts = v1.BatchRequestCounts{Total: 3, Completed: 1}
		Expect(k8s.Status().Update(ctx, b)).To(Succeed())
		b.Status.State = "paused"
		err = k8s.Status().Update(ctx, b)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("status.state"))
	})

	It("defaults backend groups, priority and weight", func() {
		r := validRoute()
		r.Namespace = ns
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Expect(r.Spec.Type).To(Equal(v1.ModelTypeText))
		Expect(r.Spec.Backends[0].Groups).To(Equal([]v1.GroupName{"default"}))
		Expect(r.Spec.Backends[0].Weight).To(Equal(int32(1)))
	})

	It("keeps a task's spec immutable", func() {
		t := validTask()
		t.Namespace = ns
		Expect(k8s.Create(ctx, t)).To(Succeed())
		t.Spec.Model = "other"
		err := k8s.Update(ctx, t)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})

	It("serves status through its own subresource", func() {
		// The status subresource exists: a status update through it is accepted,
		// and a spec change through it is ignored.
		tk := validToken()
		tk.Namespace = ns
		Expect(k8s.Create(ctx, tk)).To(Succeed())
		tk.Status.State = v1.TokenEnabled
		tk.Spec.DisplayName = "changed through status"
		Expect(k8s.Status().Update(ctx, tk)).To(Succeed())
		got := &v1.ApiToken{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tk), got)).To(Succeed())
		Expect(got.Status.State).To(Equal(v1.TokenEnabled))
		Expect(got.Spec.DisplayName).To(Equal("ci key"))
	})
})

func validWebhook(url string) *v1.WebhookSpec {
	return &v1.WebhookSpec{URL: url, SecretRef: v1.SecretKeyRef{Name: "hook", Key: "secret"}}
}
