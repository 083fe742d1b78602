package e2e

import (
	"context"
	"database/sql"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// lineTally counts, per batch line, the requests a fake upstream received,
// the line read from the prompt ("line N"), before and after a mark.
type lineTally struct {
	mu     sync.Mutex
	before map[int]int // received while the first process ran
	after  map[int]int
	marked bool
}

var linePrompt = regexp.MustCompile(`line (\d+)\b`)

func (l *lineTally) record(r fakeupstream.Request) (int, bool) {
	m := linePrompt.FindSubmatch(r.Body)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(string(m[1]))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marked {
		l.after[n]++
	} else {
		l.before[n]++
	}
	return n, true
}

func (l *lineTally) mark() {
	l.mu.Lock()
	l.marked = true
	l.mu.Unlock()
}

func (l *lineTally) received() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.before {
		n += c
	}
	for _, c := range l.after {
		n += c
	}
	return n
}

// ledgerDB opens dev's SQLite ledger in dataDir read-only.
func ledgerDB(g Gomega, dataDir string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "ledger.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	g.Expect(err).NotTo(HaveOccurred())
	return db
}

// tenantUsed is the tenant's used quota in the ledger.
func tenantUsed(g Gomega, dataDir string, userID int64) int64 {
	db := ledgerDB(g, dataDir)
	defer db.Close()
	var used int64
	g.Expect(db.QueryRow(`SELECT used_quota FROM tenants WHERE user_id = ?`, userID).Scan(&used)).To(Succeed())
	return used
}

// modelRows are the usage rows of a model: request ID → quotas.
func modelRows(g Gomega, dataDir, model string) map[string][]int64 {
	db := ledgerDB(g, dataDir)
	defer db.Close()
	rows, err := db.Query(`SELECT request_id, quota FROM usage_logs WHERE model_name = ?`, model)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var id string
		var q int64
		g.Expect(rows.Scan(&id, &q)).To(Succeed())
		out[id] = append(out[id], q)
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	return out
}

// openReservations lists the request IDs among ids, or starting with
// prefix (a batch's job reservations), whose reservation is still held.
func openReservations(g Gomega, dataDir string, ids map[string]bool, prefix string) []string {
	db := ledgerDB(g, dataDir)
	defer db.Close()
	rows, err := db.Query(`SELECT request_id FROM reservations WHERE state = 'reserved'`)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		g.Expect(rows.Scan(&id)).To(Succeed())
		if ids[id] || strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	return out
}

func devOpenAI(p *devProcess) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(p.info.GatewayURL+"/v1"), ooption.WithAPIKey(p.info.APIKey), ooption.WithMaxRetries(0))
}

// crashRig is a `modelgate dev` process with a route to a fake OpenAI
// upstream in this process (which outlives the kills), a probe billed as
// the baseline, and a tally of the lines the fake received.
type crashRig struct {
	fake    *fakeupstream.Server
	tally   *lineTally
	bin     string
	dataDir string
	devArgs []string
	p       *devProcess
	kc      client.Client
	model   string
	// used0 and tenant0 are the key's and the tenant's used quota after
	// the probe.
	used0, tenant0 int64
}

// Prices of the rig's lines: textQuota(1000, 200) = 3000 sent alone, half
// that in a batch (the default batch ratio 0.5).
const crashProbePrice, crashBatchPrice = 3000, 1500

// newCrashRig starts dev with a route to the fake whose lines answer after
// lineDelay; gateway runs batch lines through the gateway one by one
// (batch: gateway) rather than as jobs of the fake's Batch API.
func newCrashRig(t testing.TB, g Gomega, gateway bool, lineDelay time.Duration) *crashRig {
	ctx := context.Background()
	lineUsage := fakeupstream.Usage{InputTokens: 1000, OutputTokens: 200}
	r := &crashRig{tally: &lineTally{before: map[int]int{}, after: map[int]int{}}, model: uniqueModel("batch-crash")}
	// The fake runs in this process; the dev process verifies its
	// certificate with --upstream-ca-file (unless
	// MODELGATE_FAKE_UPSTREAMS=http serves it over plain HTTP).
	r.fake = startFake(t, "openai")
	if r.fake.TLS != nil {
		ca := filepath.Join(t.TempDir(), "fake-ca.pem")
		g.Expect(os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.fake.Certificate().Raw}), 0o600)).To(Succeed())
		r.devArgs = append(r.devArgs, "--upstream-ca-file", ca)
	}
	r.devArgs = append(r.devArgs, "--batch-poll-interval", "200ms")
	r.fake.Handle(func(req fakeupstream.Request) fakeupstream.Reply {
		n, ok := r.tally.record(req)
		if !ok {
			return fakeupstream.Reply{Text: "probe", Usage: lineUsage}
		}
		return fakeupstream.Reply{Text: fmt.Sprintf("Answer %d.", n), Usage: lineUsage, Delay: lineDelay}
	})

	r.bin = buildBinary(t)
	r.dataDir = t.TempDir()
	r.start(t, g)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-crash", Namespace: r.p.info.SystemNamespace},
		StringData: map[string]string{"apiKey": r.fake.Key()}}
	g.Expect(r.kc.Create(ctx, secret)).To(Succeed())
	b := sim("up", "openai")
	b.BaseURL, b.UpstreamModel = r.fake.URL, "upstream-"+r.model
	b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
	if gateway {
		b = gatewayBatches(b)
	}
	textModelOn(t, &framework.Env{Client: r.kc}, r.p.info.SystemNamespace, r.model, b)

	c := devOpenAI(r.p)
	// The route is Ready on the API server a watch event before the
	// gateway's cache has it: probe until it serves.
	g.Eventually(func() error {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: r.model, MaxTokens: openai.Int(16),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("probe")}})
		return err
	}, framework.Timeout, framework.Interval).Should(Succeed())
	// The probe is billed at the interactive price; its row and the
	// balances it moved are the baseline.
	g.Eventually(func(g Gomega) {
		_, r.used0 = keyBalance(g, r.p.info.GatewayURL, r.p.info.APIKey)
		r.tenant0 = tenantUsed(g, r.dataDir, r.p.info.UserID)
		g.Expect(r.used0).To(BeEquivalentTo(crashProbePrice))
		g.Expect(r.tenant0).To(BeEquivalentTo(crashProbePrice))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the probe is billed")
	return r
}

// batchCR reads the dev process's Batch of public ID id.
func (r *crashRig) batchCR(g Gomega, id string) *v1.Batch {
	cr := &v1.Batch{}
	g.Expect(r.kc.Get(context.Background(), client.ObjectKey{Namespace: r.p.info.TenantNamespace,
		Name: strings.ReplaceAll(id, "_", "-")}, cr)).To(Succeed())
	return cr
}

// killAndRestart SIGKILLs dev and starts it again on the same data
// directory; it returns what the fake had received at the kill.
func (r *crashRig) killAndRestart(t testing.TB, g Gomega) int {
	g.Expect(r.p.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_, _ = r.p.cmd.Process.Wait()
	time.Sleep(200 * time.Millisecond) // requests the dead process wrote reach the fake
	r.tally.mark()
	received := r.tally.received()
	r.start(t, g)
	return received
}

// start starts dev on the rig's data directory and connects to its API
// server (on a new port each start).
func (r *crashRig) start(t testing.TB, g Gomega) {
	r.p = startDev(t, r.bin, r.dataDir, r.devArgs...)
	cfg, err := clientcmd.BuildConfigFromFlags("", r.p.info.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	r.kc, err = client.New(cfg, client.Options{Scheme: kubescheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
}

// finished waits for the restarted manager to complete the batch and
// checks one result per input line across the two files; it returns the
// batch and how many lines are result_unavailable.
func (r *crashRig) finished(g Gomega, id string, lines int) (*openai.Batch, int) {
	c := devOpenAI(r.p)
	var done *openai.Batch
	var err error
	g.Eventually(func(g Gomega) {
		done, err = c.Batches.Get(context.Background(), id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(done.Status)).To(Equal("completed"))
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), "the restarted manager finishes the batch")
	results := map[string]int{}
	var unavailable int
	for _, fid := range []string{done.OutputFileID, done.ErrorFileID} {
		if fid == "" {
			continue
		}
		for _, o := range fileLines(g, c, fid) {
			results[o.CustomID]++
			if o.Error != nil && o.Error.Code == "result_unavailable" {
				unavailable++
			}
			if o.Failed() {
				GinkgoWriter.Printf("failed line %s: %s\n", o.CustomID, failure(o))
			}
		}
	}
	g.Expect(results).To(HaveLen(lines))
	for i := range lines {
		g.Expect(results["r"+strconv.Itoa(i)]).To(Equal(1), "line r%d", i)
	}
	g.Expect(done.RequestCounts.Total).To(BeEquivalentTo(lines))
	g.Expect(done.RequestCounts.Completed + done.RequestCounts.Failed).To(BeEquivalentTo(lines))
	return done, unavailable
}

// failure describes a failed output line.
func failure(o batches.OutputLine) string {
	if o.Error != nil {
		return o.Error.Code + ": " + o.Error.Message
	}
	return fmt.Sprintf("status %d: %s", o.Response.StatusCode, o.Response.Body)
}

// billedOnce checks one usage row per line at the batch price, no
// reservation of the batch left open, and the key's and the tenant's used
// quota moved by exactly the rows' sum.
func (r *crashRig) billedOnce(g Gomega, batchID string, lines int) {
	// A line's answer is recorded once its row is durable in the usage
	// spool; the writer inserts it into the ledger moments later.
	ids := map[string]bool{}
	var sum int64
	g.Eventually(func(g Gomega) {
		rows := modelRows(g, r.dataDir, r.model)
		sum = 0
		for i := range lines {
			id := batches.RequestID(batchID, int64(i+1))
			ids[id] = true
			g.Expect(rows[id]).To(Equal([]int64{crashBatchPrice}), "line %d (%s) billed once at the batch price", i, id)
			sum += rows[id][0]
		}
		g.Expect(rows).To(HaveLen(lines+1), "the probe and the lines, nothing else")
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(sum).To(BeEquivalentTo(lines * crashBatchPrice))
	g.Eventually(func() []string { return openReservations(g, r.dataDir, ids, batchID) }, 30*time.Second, 250*time.Millisecond).
		Should(BeEmpty(), "no reservation of the batch left open")
	g.Eventually(func() int64 { return tenantUsed(g, r.dataDir, r.p.info.UserID) - r.tenant0 }, 30*time.Second, 250*time.Millisecond).
		Should(Equal(sum), "the tenant's used quota moved by the lines' rows")
	g.Eventually(func(g Gomega) {
		_, used := keyBalance(g, r.p.info.GatewayURL, r.p.info.APIKey)
		g.Expect(used - r.used0).To(Equal(sum))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed(), "the key's used quota moved by the lines' rows")
}

var _ = Describe("Batches through a manager crash", Serial, Label("crash", "process"), func() {
	// `modelgate dev` (which runs the batch controller) is SIGKILLed while a
	// batch submitted with the OpenAI SDK is half run, then restarted on the
	// same data directory (etcd, ledger, blob store): the batch completes
	// with one result per line, no line is sent twice unless it was in
	// flight at the kill, and each line is billed once at the batch price.
	It("a batch survives a SIGKILL mid-run: nothing run twice, nothing billed twice", Label("sqlite"), func() {
		t := GinkgoTB()
		if testing.Short() {
			Skip("starts a control plane twice")
		}
		g := NewWithT(t)
		ctx := context.Background()
		const lines = 60
		// Slow enough that the batch is mid-way across passes when the
		// process dies.
		r := newCrashRig(t, g, true, time.Second)
		batch := submitChatBatch(g, ctx, devOpenAI(r.p), r.model, lines, 256)
		concurrency := int(r.batchCR(g, batch.ID).Spec.Concurrency)
		g.Expect(concurrency).To(BeNumerically(">", 0))

		// Kill once a pass has been stored (the status counts lines) and
		// the next pass has sent lines beyond them: some lines done and
		// stored, some done and not stored, some in flight, some not begun.
		c := devOpenAI(r.p)
		g.Eventually(func(g Gomega) {
			got, err := c.Batches.Get(ctx, batch.ID)
			g.Expect(err).NotTo(HaveOccurred())
			done := int(got.RequestCounts.Completed + got.RequestCounts.Failed)
			g.Expect(done).To(BeNumerically(">", 0))
			g.Expect(done).To(BeNumerically("<", lines-2*concurrency))
			g.Expect(r.tally.received()).To(BeNumerically(">=", done+2*concurrency))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed(), "the batch is mid-way")
		receivedAtKill := r.killAndRestart(t, g)
		_, unavailable := r.finished(g, batch.ID, lines)

		// The upstream got each line once, except those in flight at the
		// kill: sent before it without a usage row, so sent again after.
		r.tally.mu.Lock()
		var twice, never []int
		for i := range lines {
			switch n := r.tally.before[i] + r.tally.after[i]; {
			case n == 0:
				never = append(never, i)
			case n > 1:
				g.Expect(r.tally.before[i]).To(Equal(1), "line %d sent twice before the kill", i)
				g.Expect(r.tally.after[i]).To(Equal(1), "line %d sent twice after the restart", i)
				twice = append(twice, i)
			}
		}
		r.tally.mu.Unlock()
		g.Expect(never).To(BeEmpty(), "lines the upstream never saw")
		g.Expect(len(twice)).To(BeNumerically("<=", concurrency), "only lines in flight at the kill are sent again: %v", twice)
		r.billedOnce(g, batch.ID, lines)
		figures(t, "batch-sigkill", "lines %d, concurrency %d; received at the kill %d, sent twice %v, result_unavailable %d",
			lines, concurrency, receivedAtKill, twice, unavailable)
		r.p.stop(t)
	})

	// The same with the lines on the upstream's Batch API: dev dies while
	// its job runs upstream. The restarted manager finds the job in the
	// batch's record, polls it and bills its answers: the job is not
	// submitted again, no line runs twice, none is lost.
	It("a batch whose upstream job is running survives a SIGKILL: the job is adopted, nothing run or billed twice", Label("sqlite"), func() {
		t := GinkgoTB()
		if testing.Short() {
			Skip("starts a control plane twice")
		}
		g := NewWithT(t)
		ctx := context.Background()
		const lines = 30
		r := newCrashRig(t, g, false, 0)
		r.fake.SetBatchLineDelay(100 * time.Millisecond)
		batch := submitChatBatch(g, ctx, devOpenAI(r.p), r.model, lines, 256)

		// Kill once the job is recorded upstream and has run some lines.
		g.Eventually(func(g Gomega) {
			cr := r.batchCR(g, batch.ID)
			g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
			g.Expect(cr.Status.UpstreamJobs[0].ID).NotTo(BeEmpty())
			g.Expect(r.tally.received()).To(BeNumerically(">=", 3))
			g.Expect(r.tally.received()).To(BeNumerically("<", lines-5))
		}, 2*time.Minute, 20*time.Millisecond).Should(Succeed(), "the upstream job is mid-way")
		receivedAtKill := r.killAndRestart(t, g)
		done, unavailable := r.finished(g, batch.ID, lines)
		g.Expect(unavailable).To(BeZero(), "every answer of the job is read back")
		g.Expect(done.RequestCounts.Completed).To(BeEquivalentTo(lines))

		g.Expect(r.fake.BatchesCreated()).To(Equal(1), "the job is not submitted again")
		cr := r.batchCR(g, batch.ID)
		g.Expect(cr.Status.Execution).To(Equal(v1.BatchExecutionUpstream))
		g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
		r.tally.mu.Lock()
		for i := range lines {
			g.Expect(r.tally.before[i]+r.tally.after[i]).To(Equal(1), "line %d ran once upstream", i)
		}
		r.tally.mu.Unlock()
		r.billedOnce(g, batch.ID, lines)
		figures(t, "batch-upstream-sigkill", "lines %d; received upstream at the kill %d, jobs %d",
			lines, receivedAtKill, r.fake.BatchesCreated())
		r.p.stop(t)
	})
})
