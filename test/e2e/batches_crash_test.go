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

// openReservations lists the request IDs among ids whose reservation is
// still held.
func openReservations(g Gomega, dataDir string, ids map[string]bool) []string {
	db := ledgerDB(g, dataDir)
	defer db.Close()
	rows, err := db.Query(`SELECT request_id FROM reservations WHERE state = 'reserved'`)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		g.Expect(rows.Scan(&id)).To(Succeed())
		if ids[id] {
			out = append(out, id)
		}
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	return out
}

func devOpenAI(p *devProcess) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(p.info.GatewayURL+"/v1"), ooption.WithAPIKey(p.info.APIKey), ooption.WithMaxRetries(0))
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
		lineUsage := fakeupstream.Usage{InputTokens: 1000, OutputTokens: 200}
		const batchPrice = 1500 // textQuota(1000, 200) = 3000 at the default batch ratio 0.5

		// The fake runs in this process; the dev process verifies its
		// certificate with --upstream-ca-file (unless
		// MODELGATE_FAKE_UPSTREAMS=http serves it over plain HTTP).
		fake := startFake(t, "openai")
		var devArgs []string
		if fake.TLS != nil {
			ca := filepath.Join(t.TempDir(), "fake-ca.pem")
			g.Expect(os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fake.Certificate().Raw}), 0o600)).To(Succeed())
			devArgs = append(devArgs, "--upstream-ca-file", ca)
		}
		tally := &lineTally{before: map[int]int{}, after: map[int]int{}}
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			n, ok := tally.record(r)
			if !ok {
				return fakeupstream.Reply{Text: "probe", Usage: lineUsage}
			}
			// Slow enough that the batch is mid-way across passes when
			// the process dies.
			return fakeupstream.Reply{Text: fmt.Sprintf("Answer %d.", n), Usage: lineUsage, Delay: time.Second}
		})

		bin := buildBinary(t)
		dataDir := t.TempDir()
		p := startDev(t, bin, dataDir, devArgs...)

		cfg, err := clientcmd.BuildConfigFromFlags("", p.info.Kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		kc, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
		g.Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-crash", Namespace: p.info.SystemNamespace},
			StringData: map[string]string{"apiKey": fake.Key()}}
		g.Expect(kc.Create(ctx, secret)).To(Succeed())
		model := uniqueModel("batch-crash")
		b := sim("up", "openai")
		b.BaseURL, b.UpstreamModel = fake.URL, "upstream-"+model
		b.CredentialSecretRef = &v1.SecretKeyRef{Name: secret.Name, Key: "apiKey"}
		textModelOn(t, &framework.Env{Client: kc}, p.info.SystemNamespace, model, b)

		c := devOpenAI(p)
		// The route is Ready on the API server a watch event before the
		// gateway's cache has it: probe until it serves.
		g.Eventually(func() error {
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(16),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("probe")}})
			return err
		}, framework.Timeout, framework.Interval).Should(Succeed())
		// The probe is billed at the interactive price; its row and the
		// balances it moved are the baseline.
		const probePrice = 3000
		var used0, tenant0 int64
		g.Eventually(func(g Gomega) {
			_, used0 = keyBalance(g, p.info.GatewayURL, p.info.APIKey)
			tenant0 = tenantUsed(g, dataDir, p.info.UserID)
			g.Expect(used0).To(BeEquivalentTo(probePrice))
			g.Expect(tenant0).To(BeEquivalentTo(probePrice))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the probe is billed")

		batch := submitChatBatch(g, ctx, c, model, lines, 256)
		cr := &v1.Batch{}
		g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: p.info.TenantNamespace,
			Name: strings.ReplaceAll(batch.ID, "_", "-")}, cr)).To(Succeed())
		concurrency := int(cr.Spec.Concurrency)
		g.Expect(concurrency).To(BeNumerically(">", 0))

		// Kill once a pass has been stored (the status counts lines) and
		// the next pass has sent lines beyond them: some lines done and
		// stored, some done and not stored, some in flight, some not begun.
		g.Eventually(func(g Gomega) {
			got, err := c.Batches.Get(ctx, batch.ID)
			g.Expect(err).NotTo(HaveOccurred())
			done := int(got.RequestCounts.Completed + got.RequestCounts.Failed)
			g.Expect(done).To(BeNumerically(">", 0))
			g.Expect(done).To(BeNumerically("<", lines-2*concurrency))
			g.Expect(tally.received()).To(BeNumerically(">=", done+2*concurrency))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed(), "the batch is mid-way")
		g.Expect(p.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_, _ = p.cmd.Process.Wait()
		time.Sleep(200 * time.Millisecond) // requests the dead process wrote reach the fake
		tally.mark()
		receivedAtKill := tally.received()

		p = startDev(t, bin, dataDir, devArgs...)
		c = devOpenAI(p)
		var done *openai.Batch
		g.Eventually(func(g Gomega) {
			done, err = c.Batches.Get(ctx, batch.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(done.Status)).To(Equal("completed"))
		}, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), "the restarted manager finishes the batch")

		// One result per input line, across the two files.
		results := map[string]int{}
		var unavailable int
		for _, id := range []string{done.OutputFileID, done.ErrorFileID} {
			if id == "" {
				continue
			}
			for _, o := range fileLines(g, c, id) {
				results[o.CustomID]++
				if o.Error != nil && o.Error.Code == "result_unavailable" {
					unavailable++
				}
			}
		}
		g.Expect(results).To(HaveLen(lines))
		for i := range lines {
			g.Expect(results["r"+strconv.Itoa(i)]).To(Equal(1), "line r%d", i)
		}
		g.Expect(done.RequestCounts.Total).To(BeEquivalentTo(lines))
		g.Expect(done.RequestCounts.Completed + done.RequestCounts.Failed).To(BeEquivalentTo(lines))

		// The upstream got each line once, except those in flight at the
		// kill: sent before it without a usage row, so sent again after.
		tally.mu.Lock()
		var twice, never []int
		for i := range lines {
			switch n := tally.before[i] + tally.after[i]; {
			case n == 0:
				never = append(never, i)
			case n > 1:
				g.Expect(tally.before[i]).To(Equal(1), "line %d sent twice before the kill", i)
				g.Expect(tally.after[i]).To(Equal(1), "line %d sent twice after the restart", i)
				twice = append(twice, i)
			}
		}
		tally.mu.Unlock()
		g.Expect(never).To(BeEmpty(), "lines the upstream never saw")
		g.Expect(len(twice)).To(BeNumerically("<=", concurrency), "only lines in flight at the kill are sent again: %v", twice)

		// One usage row per line, at the batch price, and the balances
		// moved by exactly their sum.
		rows := modelRows(g, dataDir, model)
		ids := map[string]bool{}
		var sum int64
		for i := range lines {
			id := batches.RequestID(batch.ID, int64(i+1))
			ids[id] = true
			g.Expect(rows[id]).To(Equal([]int64{batchPrice}), "line %d (%s) billed once at the batch price", i, id)
			sum += rows[id][0]
		}
		g.Expect(rows).To(HaveLen(lines+1), "the probe and the lines, nothing else")
		g.Expect(sum).To(BeEquivalentTo(lines * batchPrice))
		g.Eventually(func() []string { return openReservations(g, dataDir, ids) }, 30*time.Second, 250*time.Millisecond).
			Should(BeEmpty(), "no reservation of the batch left open")
		g.Eventually(func() int64 { return tenantUsed(g, dataDir, p.info.UserID) - tenant0 }, 30*time.Second, 250*time.Millisecond).
			Should(Equal(sum), "the tenant's used quota moved by the lines' rows")
		g.Eventually(func(g Gomega) {
			_, used := keyBalance(g, p.info.GatewayURL, p.info.APIKey)
			g.Expect(used - used0).To(Equal(sum))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed(), "the key's used quota moved by the lines' rows")
		figures(t, "batch-sigkill", "lines %d, concurrency %d; received at the kill %d, sent twice %v, result_unavailable %d",
			lines, concurrency, receivedAtKill, twice, unavailable)
		p.stop(t)
	})
})
