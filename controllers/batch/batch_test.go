package batch_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

const chat = "/v1/chat/completions"

// Every line is answered with 100 input and 20 output tokens: 600 µUSD at
// the price below (3 USD in, 15 USD out per 1M tokens), 300 quota alone,
// 150 at the default batch ratio of 0.5.
const (
	inTokens, outTokens = 100, 20
	linePrice           = billing.Quota(150)
)

// fixture is one spec's account, model and fake upstream.
type fixture struct {
	acct  *framework.Account
	model string
	fake  *fakeupstream.Server
	calls atomic.Int64
	// nextID, when set, is the ID of the next batch submitted.
	nextID string
}

func newFixture(reply func(fakeupstream.Request) fakeupstream.Reply) *fixture {
	return newFixtureWithQuota(reply, 5*billing.QuotaPerUSD)
}

// newFixtureWithQuota is newFixture with a key of quota (the tenant has
// 5 USD).
func newFixtureWithQuota(reply func(fakeupstream.Request) fakeupstream.Reply, keyQuota billing.Quota) *fixture {
	return newFixtureOn(reply, keyQuota, true)
}

// newUpstreamFixture is newFixture on a route whose lines run as jobs of
// the fake's Batch API (Upstream execution).
func newUpstreamFixture(reply func(fakeupstream.Request) fakeupstream.Reply) *fixture {
	return newFixtureOn(reply, 5*billing.QuotaPerUSD, false)
}

// newFixtureOn makes the fixture; gateway: the route's lines run through
// the gateway one by one (backend option batch: gateway), else as jobs of
// the fake's Batch API.
func newFixtureOn(reply func(fakeupstream.Request) fakeupstream.Reply, keyQuota billing.Quota, gateway bool) *fixture {
	ctx := context.Background()
	f := &fixture{fake: fakeupstream.NewOpenAI(), model: fmt.Sprintf("batch-model-%d", time.Now().UnixNano())}
	DeferCleanup(f.fake.Close)
	f.fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
		f.calls.Add(1)
		out := fakeupstream.Reply{Text: "ok", Usage: fakeupstream.Usage{InputTokens: inTokens, OutputTokens: outTokens}}
		if reply != nil {
			out = reply(r)
		}
		return out
	})
	credits := v1.Decimal("1000")
	quota := int64(keyQuota)
	var err error
	f.acct, err = env.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: &credits}}},
		v1.ApiTokenSpec{Quota: &quota})
	Expect(err).NotTo(HaveOccurred())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "upstream-", Namespace: framework.SystemNamespace},
		StringData: map[string]string{"apiKey": f.fake.Key()}}
	Expect(env.Client.Create(ctx, secret)).To(Succeed())
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: f.model, Namespace: framework.SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(f.model), Type: v1.ModelTypeText, MaxOutputTokens: 1000,
			Backends: []v1.Backend{{Name: "fake", Provider: "openai", BaseURL: f.fake.URL + "/v1", Weight: 1,
				Groups: []v1.GroupName{"default"}, CredentialSecretRef: &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}}}},
	}
	if gateway {
		route.Spec.Backends[0].Options = map[string]string{"batch": "gateway"}
	}
	out := v1.Decimal("15")
	price := &v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Name: f.model, Namespace: framework.SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(f.model), ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "3", OutputUnitPrice: &out},
	}
	Expect(env.Client.Create(ctx, route)).To(Succeed())
	Expect(env.Client.Create(ctx, price)).To(Succeed())
	DeferCleanup(func() {
		_ = env.Client.Delete(context.Background(), route)
		_ = env.Client.Delete(context.Background(), price)
		_ = env.Client.Delete(context.Background(), secret)
	})
	Expect(env.WaitReady(ctx, route)).To(Succeed())
	Expect(env.WaitReady(ctx, price)).To(Succeed())
	return f
}

// input is a JSONL file of n chat lines whose i-th (0-based) says what(i).
func input(n int, what func(i int) string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"%s","body":{"model":"MODEL","max_tokens":50,"messages":[{"role":"user","content":%q}]}}`+"\n",
			i, chat, what(i))
	}
	return b.String()
}

// batchID is the ID of the next batch submitted: nextID when set.
func (f *fixture) batchID() string {
	if id := f.nextID; id != "" {
		f.nextID = ""
		return id
	}
	return fmt.Sprintf("batch_%d", time.Now().UnixNano())
}

// submit uploads the input file and creates the Batch, as the API does.
func (f *fixture) submit(in string, concurrency int32, window time.Duration) *v1.Batch {
	ctx := context.Background()
	file, err := fstore.Create(ctx, files.Upload{UserID: f.acct.Tenant.Status.UserID, TokenID: f.acct.Token.Status.TokenID,
		Purpose: files.PurposeBatch, Filename: "in.jsonl"}, strings.NewReader(strings.ReplaceAll(in, "MODEL", f.model)))
	Expect(err).NotTo(HaveOccurred())
	b := &v1.Batch{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "batch-", Namespace: f.acct.Namespace},
		Spec: v1.BatchSpec{BatchID: f.batchID(), Endpoint: chat, InputFileID: file.ID,
			Concurrency: concurrency, TokenName: f.acct.Token.Name, TokenID: f.acct.Token.Status.TokenID,
			UserID: f.acct.Tenant.Status.UserID},
	}
	if window > 0 {
		b.Spec.CompletionWindow = &metav1.Duration{Duration: window}
	}
	Expect(env.Client.Create(ctx, b)).To(Succeed())
	return b
}

// waitState waits until b is in state and returns it.
func waitState(b *v1.Batch, state v1.BatchState) *v1.Batch {
	got := &v1.Batch{}
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), got)).To(Succeed())
		g.Expect(got.Status.State).To(Equal(state))
	}, framework.LongTimeout, framework.Interval).Should(Succeed())
	return got
}

// waitJob waits until b's first upstream job is submitted and returns b and
// the job's ID.
func waitJob(b *v1.Batch) (*v1.Batch, string) {
	cur := &v1.Batch{}
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), cur)).To(Succeed())
		g.Expect(cur.Status.UpstreamJobs).To(HaveLen(1))
	}, framework.LongTimeout, framework.Interval).Should(Succeed())
	return cur, cur.Status.UpstreamJobs[0].ID
}

// resultLines reads a result file's lines (none without a file).
func resultLines(b *v1.Batch, id string) []batches.OutputLine {
	if id == "" {
		return nil
	}
	_, rd, err := fstore.Open(context.Background(), b.Spec.UserID, id)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = rd.Close() }()
	var out []batches.OutputLine
	sc := bufio.NewScanner(rd)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o batches.OutputLine
		Expect(json.Unmarshal(sc.Bytes(), &o)).To(Succeed())
		out = append(out, o)
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// rows waits until b's lines 1..n have want usage rows (the usage writer
// inserts them shortly after they are durable) and returns them by request
// ID.
func rows(b *v1.Batch, n, want int) map[string]billing.Quota {
	ids := make([]string, n)
	for i := range n {
		ids[i] = batches.RequestID(b.Spec.BatchID, int64(i+1))
	}
	var got map[string]billing.Quota
	Eventually(func(g Gomega) {
		var err error
		got, err = ledger.UsageQuotas(context.Background(), ids)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(want))
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return got
}

func sum(m map[string]billing.Quota) billing.Quota {
	var s billing.Quota
	for _, q := range m {
		s += q
	}
	return s
}

var _ = Describe("Batch controller", func() {
	It("runs a batch larger than its concurrency to completion, one usage row per line at the batch price", func() {
		f := newFixture(nil)
		const n = 9
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprintf("line %d", i) }), 2, 0), v1.BatchCompleted)

		Expect(f.calls.Load()).To(Equal(int64(n)), "each line reached the upstream once")
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n}))
		got := rows(b, n, n) // one usage row per line, keyed by the line's request ID
		for id, q := range got {
			Expect(q).To(Equal(linePrice), "row %s is charged at the batch price", id)
		}
		Expect(b.Status.Cost).NotTo(BeNil())
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)), "status cost is the sum of the rows")
		Expect(*b.Status.Cost.CostUSD).To(Equal(v1.Decimal(sum(got).CostUSD())))
		Expect(b.Status.Usage).To(Equal(&v1.BatchTokens{InputTokens: n * inTokens, OutputTokens: n * outTokens}),
			"the tokens of the usage rows")
		Expect(b.Status.Model).To(Equal(f.model))
		Expect(b.Status.CompletedAt).NotTo(BeNil())
		Expect(b.Status.ErrorFileID).To(BeEmpty(), "no failed line, no error file")

		out := resultLines(b, b.Status.OutputFileID)
		Expect(out).To(HaveLen(n))
		for i, o := range out {
			Expect(o.CustomID).To(Equal(fmt.Sprintf("req-%d", i)), "file order")
			Expect(o.Response.StatusCode).To(Equal(200))
			Expect(o.Response.RequestID).To(Equal(batches.RequestID(b.Spec.BatchID, int64(i+1))))
			Expect(string(o.Response.Body)).To(ContainSubstring(`"chat.completion"`))
		}
	})

	It("puts a line the upstream refuses in the error file and runs the others", func() {
		f := newFixture(func(r fakeupstream.Request) fakeupstream.Reply {
			if bytes.Contains(r.Body, []byte("refuse me")) {
				return fakeupstream.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "this line is refused"}
			}
			return fakeupstream.Reply{Text: "ok", Usage: fakeupstream.Usage{InputTokens: inTokens, OutputTokens: outTokens}}
		})
		const n = 5
		b := waitState(f.submit(input(n, func(i int) string {
			if i == 2 {
				return "refuse me"
			}
			return "fine"
		}), 2, 0), v1.BatchCompleted)

		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n - 1, Failed: 1}))
		out, errs := resultLines(b, b.Status.OutputFileID), resultLines(b, b.Status.ErrorFileID)
		Expect(out).To(HaveLen(n - 1))
		Expect(errs).To(HaveLen(1))
		Expect(errs[0].CustomID).To(Equal("req-2"))
		Expect(errs[0].Response.StatusCode).To(Equal(400))
		Expect(string(errs[0].Response.Body)).To(ContainSubstring("this line is refused"))
		got := rows(b, n, n-1) // the refused line is not billed
		Consistently(func() (map[string]billing.Quota, error) {
			return ledger.UsageQuotas(context.Background(), []string{batches.RequestID(b.Spec.BatchID, 3)})
		}, time.Second).Should(BeEmpty())
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
	})

	It("goes on past a line refused for quota: the refusal is in the error file, nothing is billed for it", func() {
		// 1 000 quota pays for a few lines at 150 each; each line reserves
		// before it runs, so the ones that do not fit are refused.
		const keyQuota = 1000
		f := newFixtureWithQuota(nil, keyQuota)
		const n = 12
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 0), v1.BatchCompleted)

		c := b.Status.RequestCounts
		Expect(c.Total).To(Equal(int64(n)))
		Expect(c.Completed).To(BeNumerically(">", 0))
		Expect(c.Failed).To(BeNumerically(">", 0), "the key ran out")
		Expect(c.Completed + c.Failed).To(Equal(int64(n)))
		Expect(f.calls.Load()).To(Equal(c.Completed), "a refused line is never sent")
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(int(c.Failed)))
		for _, e := range errs {
			Expect(e.Response.StatusCode).To(Equal(429))
			Expect(string(e.Response.Body)).To(ContainSubstring("insufficient_quota"))
		}
		got := rows(b, n, int(c.Completed))
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		Eventually(func() (billing.Quota, error) {
			used, err := ledger.TokenUsage(context.Background(), f.acct.Token.Status.TokenID)
			return used.Used, err
		}, framework.Timeout).Should(Equal(sum(got)), "the key paid exactly the rows")
	})

	It("refuses a streaming line in the error file without sending it", func() {
		f := newFixture(nil)
		in := input(2, func(int) string { return "x" })
		in = strings.Replace(in, `"max_tokens":50`, `"max_tokens":50,"stream":true`, 1)
		b := waitState(f.submit(in, 1, 0), v1.BatchCompleted)
		Expect(f.calls.Load()).To(Equal(int64(1)))
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(1))
		Expect(errs[0].Response.StatusCode).To(Equal(400))
		Expect(string(errs[0].Response.Body)).To(ContainSubstring("stream is not supported"))
	})

	It("fails a batch with an invalid input file in validation, billing nothing", func() {
		f := newFixture(nil)
		in := input(2, func(int) string { return "x" }) + "not json\n"
		b := waitState(f.submit(in, 1, 0), v1.BatchFailed)
		Expect(b.Status.Errors).To(ConsistOf(v1.BatchError{Code: "invalid_json_line", Line: 3, Message: "the line is not a JSON object"}))
		Expect(f.calls.Load()).To(BeZero())
		Expect(rows(b, 3, 0)).To(BeEmpty())
	})

	It("fails, without running it, a batch the gateway refused beyond its format", func() {
		f := newFixture(nil)
		ctx := context.Background()
		file, err := fstore.Create(ctx, files.Upload{UserID: f.acct.Tenant.Status.UserID, Purpose: files.PurposeBatch, Filename: "in.jsonl"},
			strings.NewReader(strings.ReplaceAll(input(2, func(int) string { return "x" }), "MODEL", f.model)))
		Expect(err).NotTo(HaveOccurred())
		b := &v1.Batch{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "batch-", Namespace: f.acct.Namespace,
				Annotations: map[string]string{batches.InputErrorAnnotation: `{"code":"model_not_allowed","message":"the key may not use it","line":2}`}},
			Spec: v1.BatchSpec{BatchID: fmt.Sprintf("batch_%d", time.Now().UnixNano()), Endpoint: chat, InputFileID: file.ID,
				TokenName: f.acct.Token.Name, TokenID: f.acct.Token.Status.TokenID, UserID: f.acct.Tenant.Status.UserID},
		}
		Expect(env.Client.Create(ctx, b)).To(Succeed())
		b = waitState(b, v1.BatchFailed)
		Expect(b.Status.Errors).To(ConsistOf(v1.BatchError{Code: "model_not_allowed", Message: "the key may not use it", Line: 2}))
		Consistently(f.calls.Load, time.Second).Should(BeZero())
	})

	It("cancels midway: running lines finish, unrun lines go to the error file, only what ran is billed", func() {
		f := newFixture(func(fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Text: "ok", Delay: 150 * time.Millisecond, Usage: fakeupstream.Usage{InputTokens: inTokens, OutputTokens: outTokens}}
		})
		const n = 30
		b := f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 0)
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), b)).To(Succeed())
			g.Expect(b.Status.RequestCounts.Completed).To(BeNumerically(">=", 2))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		patch := client.MergeFrom(b.DeepCopy())
		b.Annotations = map[string]string{batch.CancelAnnotation: time.Now().UTC().Format(time.RFC3339)}
		Expect(env.Client.Patch(context.Background(), b, patch)).To(Succeed())

		b = waitState(b, v1.BatchCancelled)
		ran := f.calls.Load()
		Expect(ran).To(BeNumerically("<", n), "lines stopped starting")
		Expect(b.Status.CancellingAt).NotTo(BeNil())
		Expect(b.Status.CancelledAt).NotTo(BeNil())
		Expect(b.Status.RequestCounts.Completed).To(Equal(ran))
		Expect(b.Status.RequestCounts.Failed).To(Equal(n - ran))
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(int(n - ran)))
		for _, e := range errs {
			Expect(e.Response).To(BeNil())
			Expect(e.Error.Code).To(Equal("batch_cancelled"))
		}
		Expect(resultLines(b, b.Status.OutputFileID)).To(HaveLen(int(ran)))
		got := rows(b, n, int(ran)) // only the lines that ran are billed
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		Consistently(f.calls.Load, time.Second).Should(Equal(ran))
	})

	It("expires at the end of the completion window: unrun lines are batch_expired", func() {
		f := newFixture(func(fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Text: "ok", Delay: 200 * time.Millisecond, Usage: fakeupstream.Usage{InputTokens: inTokens, OutputTokens: outTokens}}
		})
		const n = 40
		// The window is counted from the object's creation; the API server
		// stamps it to the second, so the window is at least 2 s.
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 3*time.Second), v1.BatchExpired)
		ran := f.calls.Load()
		Expect(ran).To(BeNumerically(">", 0))
		Expect(ran).To(BeNumerically("<", n))
		Expect(b.Status.ExpiredAt).NotTo(BeNil())
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: ran, Failed: n - ran}))
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(int(n - ran)))
		Expect(errs[0].Error.Code).To(Equal("batch_expired"))
		got := rows(b, n, int(ran))
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
	})

	It("runs in a manager without a gateway, on a text pipeline of its own", func() {
		f := newFixture(nil)
		sys.stop()
		sys = startManager()
		DeferCleanup(func() { sys.stop(); sys = startSystem() })
		const n = 4
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 2, 0), v1.BatchCompleted)
		Expect(f.calls.Load()).To(Equal(int64(n)))
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n}))
		got := rows(b, n, n)
		Expect(sum(got)).To(Equal(linePrice * n))
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		Expect(resultLines(b, b.Status.OutputFileID)).To(HaveLen(n))
	})

	It("does not send again a line an earlier run billed but did not record (a hard crash)", func() {
		f := newFixture(nil)
		f.nextID = fmt.Sprintf("batch_%d", time.Now().UnixNano())
		// What a run killed between the usage row and the part leaves: line
		// 2's row in the ledger, no result.
		_, err := ledger.InsertUsage(context.Background(), []store.UsageRow{{RequestID: batches.RequestID(f.nextID, 2),
			UserID: f.acct.Tenant.Status.UserID, TokenID: f.acct.Token.Status.TokenID, TokenName: "k", ModelName: f.model,
			PromptTokens: inTokens, CompletionTokens: outTokens, BillingPhase: store.PhaseSettled, Quota: linePrice}})
		Expect(err).NotTo(HaveOccurred())
		const n = 3
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 0), v1.BatchCompleted)
		Expect(f.calls.Load()).To(Equal(int64(n-1)), "line 2 is not sent again")
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n - 1, Failed: 1}))
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(1))
		Expect(errs[0].CustomID).To(Equal("req-1"))
		Expect(errs[0].Error.Code).To(Equal("result_unavailable"))
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(linePrice*n), "its row counts in the cost, once")
		Expect(sum(rows(b, n, n))).To(Equal(linePrice * n))
	})

	It("survives a manager restart mid-batch: no line runs twice, no row is billed twice", func() {
		f := newFixture(func(fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Text: "ok", Delay: 100 * time.Millisecond, Usage: fakeupstream.Usage{InputTokens: inTokens, OutputTokens: outTokens}}
		})
		const n = 24
		b := f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 2, 0)
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), b)).To(Succeed())
			g.Expect(b.Status.RequestCounts.Completed).To(BeNumerically(">=", 4))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		sys.stop()
		before := f.calls.Load()
		Expect(before).To(BeNumerically("<", n), "the batch was stopped midway")
		sys = startSystem()

		b = waitState(b, v1.BatchCompleted)
		Expect(resultLines(b, b.Status.ErrorFileID)).To(BeEmpty())
		Expect(f.calls.Load()).To(Equal(int64(n)), "every line reached the upstream exactly once across both runs")
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n}))
		got := rows(b, n, n)
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		Expect(sum(got)).To(Equal(linePrice * n))
		Eventually(func() (billing.Quota, error) {
			used, err := ledger.TokenUsage(context.Background(), f.acct.Token.Status.TokenID)
			return used.Used, err
		}, framework.Timeout).Should(Equal(linePrice*n), "the key was charged each line once")
		seen := map[string]bool{}
		for _, o := range resultLines(b, b.Status.OutputFileID) {
			Expect(seen[o.CustomID]).To(BeFalse(), "line %s recorded twice", o.CustomID)
			seen[o.CustomID] = true
		}
		Expect(seen).To(HaveLen(n))
	})

	It("expires an upstream batch at the end of its window: the job is cancelled upstream, its unrun lines are batch_expired", func() {
		f := newUpstreamFixture(nil)
		f.fake.SetBatchLineDelay(200 * time.Millisecond)
		const n = 40
		b := waitState(f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 3*time.Second), v1.BatchExpired)
		Expect(b.Status.Execution).To(Equal(v1.BatchExecutionUpstream))
		Expect(b.Status.UpstreamJobs).To(HaveLen(1))
		Expect(f.fake.BatchStatus(b.Status.UpstreamJobs[0].ID)).To(Equal("cancelled"), "the job was stopped upstream")
		ran := f.calls.Load()
		Expect(ran).To(BeNumerically(">", 0))
		Expect(ran).To(BeNumerically("<", n))
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: ran, Failed: n - ran}))
		errs := resultLines(b, b.Status.ErrorFileID)
		Expect(errs).To(HaveLen(int(n - ran)))
		for _, e := range errs {
			Expect(e.Error.Code).To(Equal("batch_expired"))
		}
		got := rows(b, n, int(ran))
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		Expect(b.Status.Usage).To(Equal(&v1.BatchTokens{InputTokens: ran * inTokens, OutputTokens: ran * outTokens}),
			"the tokens of the lines the job ran")
		h, err := ledger.TokenHolds(context.Background(), f.acct.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Reserved).To(BeZero(), "the job's reservation closed")
		Eventually(func(g Gomega) {
			cur := &v1.Batch{}
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), cur)).To(Succeed())
			g.Expect(cur.Finalizers).NotTo(ContainElement(batch.Finalizer), "an ended batch is not held")
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("deletes a batch whose upstream job runs only after stopping the job upstream and billing the lines it ran", func() {
		f := newUpstreamFixture(nil)
		f.fake.SetBatchLineDelay(200 * time.Millisecond)
		const n = 40
		b := f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 0)
		cur, job := waitJob(b)
		Expect(cur.Finalizers).To(ContainElement(batch.Finalizer), "held while a job may run upstream")
		Eventually(f.calls.Load, framework.LongTimeout, framework.Interval).Should(BeNumerically(">=", 3), "the job runs upstream")
		Expect(env.Client.Delete(context.Background(), b)).To(Succeed())
		Eventually(func() bool {
			err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), &v1.Batch{})
			return apierrors.IsNotFound(err)
		}, framework.LongTimeout, framework.Interval).Should(BeTrue(), "the batch goes once its job is stopped")
		Expect(f.fake.BatchStatus(job)).To(Equal("cancelled"), "the job was stopped upstream")
		ran := f.calls.Load()
		Expect(ran).To(BeNumerically(">", 0))
		Expect(ran).To(BeNumerically("<", n), "the cancel stopped the lines not yet run")
		got := rows(b, n, int(ran))
		for _, q := range got {
			Expect(q).To(Equal(linePrice))
		}
		Eventually(func() (billing.Quota, error) {
			used, err := ledger.TokenUsage(context.Background(), f.acct.Token.Status.TokenID)
			return used.Used, err
		}, framework.Timeout).Should(Equal(sum(got)), "the key pays what the upstream ran, once")
		h, err := ledger.TokenHolds(context.Background(), f.acct.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Reserved).To(BeZero(), "the job's reservation closed")
	})

	It("keeps a running upstream job's reservation past the stale-reservation sweep, then bills the job exactly", func() {
		f := newUpstreamFixture(nil)
		f.fake.SetBatchLineDelay(100 * time.Millisecond)
		const n = 10
		b := f.submit(input(n, func(i int) string { return fmt.Sprint(i) }), 1, 0)
		_, job := waitJob(b)
		Expect(f.fake.BatchStatus(job)).NotTo(Equal("completed"), "the job still runs")
		held, err := ledger.TokenHolds(context.Background(), f.acct.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Reserved).To(BeNumerically(">", 0), "the job's lines are reserved")
		// Every reservation is older than zero: only a hold spares it.
		refunded, err := ledger.RefundStale(context.Background(), 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(refunded.Quota).To(BeZero())
		again, err := ledger.TokenHolds(context.Background(), f.acct.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Reserved).To(Equal(held.Reserved), "the sweep left the job's reservation alone")

		b = waitState(b, v1.BatchCompleted)
		Expect(b.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: n, Completed: n}))
		got := rows(b, n, n)
		Expect(billing.Quota(b.Status.Cost.Quota)).To(Equal(sum(got)))
		after, err := ledger.TokenHolds(context.Background(), f.acct.Token.Status.TokenID)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Reserved).To(BeZero())
	})
})
