package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL driver, to read the ledger directly
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/framework"
	"github.com/modelgate/modelgate/test/pgtest"
)

// Settings of the three-replica test: a short lease TTL and sweep interval
// so that a dead replica's lease comes back within seconds. (Lease expiry is
// kept in whole seconds, and the lease must outlive the request and its row
// reaching the database before the kill, on a busy machine too.)
const (
	replicaLeaseTTL   = 5 * time.Second
	replicaSweepEvery = time.Second
)

var _ = Describe("Three gateway replicas on one PostgreSQL", Serial, Ordered, Label("replicas", "postgres", "process"), func() {
	// Three `modelgate gateway` processes (replica IDs replica-a, -b and -c,
	// each with its own spool directory) and one `modelgate manager` on one
	// PostgreSQL ledger and one control plane.
	//
	//  1. 300 concurrent POST /v1/messages spread round-robin over the replicas
	//     on a key worth about 20 calls: every answer is served, refused for
	//     quota in the contract's shape, or rate limited; at least one is
	//     served; the total charged never exceeds the balance; the usage rows
	//     are exactly the served responses; what was not charged is back.
	//  2. a key worth $0.40 serves max_tokens 32 000 requests on every
	//     replica, one at a time and 60 at once, each with its output cap
	//     lowered to what is left (x-modelgate-output-cap) and the upstream's
	//     answer within it; the key is never overspent.
	//  3. replica-b takes a lease on a key with a larger balance, then is
	//     SIGKILLed (it cannot return the lease): within the lease TTL plus the
	//     sweep interval the manager's sweeper returns the lease, and the key's
	//     remain + used in the ledger is whole again.
	var (
		db       *sql.DB
		env      *framework.Env
		replicas []*process
		model    string
	)

	BeforeAll(func() {
		t := GinkgoTB()
		if testing.Short() {
			Skip("starts a control plane, a manager and three gateways")
		}
		g := NewWithT(t)
		db, env, replicas = startReplicaCluster(t)
		for _, r := range replicas { // one spool per replica, named after it, in its own directory
			spools, _ := filepath.Glob(filepath.Join(r.dir, "usage-*.spool*"))
			g.Expect(spools).NotTo(BeEmpty())
			for _, f := range spools {
				g.Expect(filepath.Base(f)).To(HavePrefix("usage-"+r.name+".spool"), "every spool file of %s is its own", r.name)
			}
		}

		model = uniqueModel("sim-replicas")
		textModelOn(t, env, framework.SystemNamespace, model, sim("sim", "simulated"))
	})

	It("never overspend a balance of about 20 calls under 300 concurrent requests", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		// A call of this model with max_tokens 64 is charged about 53 quota
		// and reserves about 495 (see liveness_test.go).
		// The tenant has 1 000 credits (2.5 M quota): the key's quota binds.
		const balance = 20 * 53
		q := int64(balance)
		a := newAccountOn(t, env, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
		tokenID := a.Token.Status.TokenID
		waitModelListed(t, replicas, a.Key, model)

		res := burstOver(t, replicas, a.Key, model, 300)
		figures(t, "statuses", "statuses by replica: %v; served %d", res.byReplica, len(res.served))
		for code := range res.statuses {
			g.Expect(code).To(BeElementOf(200, 400, 429),
				"served, refused for quota (400 in the Messages shape) or rate limited: %v", res.statuses)
		}
		g.Expect(res.badRefusals).To(BeEmpty(), "refusals not in the contract's insufficient-quota shape")
		g.Expect(res.incomplete).To(BeZero(), "200 answers without a complete message")
		g.Expect(len(res.served)).To(BeNumerically(">=", 1), "at least one request fits the balance: %v", res.statuses)

		// Served responses are settled before they are answered; their usage
		// rows reach the database from the replicas' spools in batches.
		var l ledgerFigures
		g.Eventually(func(g Gomega) {
			l = readLedger(g, db, tokenID)
			g.Expect(l.rows).To(HaveLen(len(res.served)))
		}, framework.Timeout, framework.Interval).Should(Succeed(), "one usage row per served response")
		figures(t, "balance", "balance %d: served %d, refused %d; charged %d (rows) / %d (used), remain %d; usage rows %d",
			balance, len(res.served), 300-len(res.served), l.rowQuota, l.used, l.remain, len(l.rows))
		for id := range res.served {
			g.Expect(l.rows).To(HaveKey(id), "a served response without its usage row")
		}
		g.Expect(l.rowQuota).To(BeNumerically("<=", balance), "charged (the sum of the usage rows) no more than the balance")
		g.Expect(l.used).To(BeNumerically("<=", balance), "used quota no more than the balance")
		g.Expect(l.used).To(Equal(l.rowQuota), "used quota = the sum of the usage rows")
		g.Expect(l.remain).To(BeNumerically(">=", 0))
		g.Expect(l.remain+l.used).To(Equal(int64(balance)), "what was not charged is back")
		g.Expect(l.leases).To(BeZero(), "below two chunks the replicas reserve directly")
		for _, r := range replicas {
			remain, used := keyBalance(g, r.base, a.Key)
			g.Expect(used).To(Equal(l.used), "GET /v1/balance on %s", r.name)
			g.Expect(remain + used).To(Equal(int64(balance)))
		}
	})

	It("serve a small key's Claude-Code-sized requests on every replica, each with its cap lowered, never overspending it", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		// $0.40 of quota: one max_tokens 32 000 reservation of this model
		// (about 7.5 quota an output token) would take more than the whole
		// key, so on main every request was refused. Below two chunks the
		// replicas reserve directly, each fitting its cap inside the
		// reservation's transaction against the others.
		q := int64(billing.QuotaPerUSD) * 40 / 100
		a := newAccountOn(t, env, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
		tokenID := a.Token.Status.TokenID
		waitModelListed(t, replicas, a.Key, model)

		// One at a time, as an agent's turns come, through each replica:
		// each is served with its cap lowered to what is left.
		served := map[string]bool{}
		check := func(res burstResult) {
			g.Expect(res.badRefusals).To(BeEmpty())
			g.Expect(res.incomplete).To(BeZero())
			g.Expect(res.capped).To(HaveLen(len(res.served)), "every served request had its cap lowered: %v", res.statuses)
			for id, c := range res.capped {
				g.Expect(c).To(BeNumerically(">", 0))
				g.Expect(c).To(BeNumerically("<", 32000))
				g.Expect(res.outputs[id]).To(BeNumerically("<=", c), "the upstream answered within the lowered cap")
				served[id] = true
			}
		}
		for _, r := range replicas {
			res := burstOverCapped(t, []*process{r}, a.Key, model, 1, 32000)
			g.Expect(res.served).To(HaveLen(1), "%s: %v", r.name, res.statuses)
			check(res)
		}
		// Then 60 at once over the three: each reservation takes what it is
		// allowed of what is left, so some are refused for quota, and the
		// key is never overspent.
		res := burstOverCapped(t, replicas, a.Key, model, 60, 32000)
		figures(t, "capped", "statuses by replica: %v; served %d, lowered %d", res.byReplica, len(res.served), len(res.capped))
		for code := range res.statuses {
			g.Expect(code).To(BeElementOf(200, 400), "%v", res.statuses)
		}
		check(res)

		var l ledgerFigures
		g.Eventually(func(g Gomega) {
			l = readLedger(g, db, tokenID)
			g.Expect(l.rows).To(HaveLen(len(served)))
		}, framework.Timeout, framework.Interval).Should(Succeed(), "one usage row per served response")
		for id := range served {
			g.Expect(l.rows).To(HaveKey(id))
		}
		g.Expect(l.used).To(Equal(l.rowQuota), "used quota = the sum of the usage rows")
		g.Expect(l.remain).To(BeNumerically(">=", 0), "never overspent")
		g.Expect(l.remain+l.used).To(Equal(q), "what was not charged is back")
	})

	It("return the lease of a replica SIGKILLed holding it", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		// 5 USD on the key and the tenant: above two chunks (2 USD), so the
		// replica leases instead of reserving directly.
		a := newAccountOn(t, env, v1.TenantSpec{}, v1.ApiTokenSpec{})
		tokenID := a.Token.Status.TokenID
		quota := *a.Token.Spec.Quota
		waitModelListed(t, replicas, a.Key, model)
		victim, witness := replicas[1], replicas[0]

		res := burstOver(t, []*process{victim}, a.Key, model, 1)
		g.Expect(res.served).To(HaveLen(1), "%v", res.statuses)
		var before ledgerFigures
		g.Eventually(func(g Gomega) {
			before = readLedger(g, db, tokenID)
			g.Expect(before.rows).To(HaveLen(1))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		g.Expect(before.leaseReplicas).To(Equal([]string{victim.name}), "the request was served from %s's lease", victim.name)
		g.Expect(before.leased).To(BeNumerically(">", 0))
		g.Expect(before.remain+before.used+before.leased).To(Equal(quota), "remain + used + leased = the key's quota")

		victim.kill()
		killed := time.Now()
		held := readLedger(g, db, tokenID)
		g.Expect(held.leased).To(Equal(before.leased), "the killed replica did not return its lease")
		g.Expect(held.remain+held.used).To(BeNumerically("<", quota), "until the sweep the lease's quota is out of the balance")
		remain, used := keyBalance(g, witness.base, a.Key)
		g.Expect(remain+used).To(Equal(quota), "GET /v1/balance counts a lease as remaining meanwhile")

		var after ledgerFigures
		g.Eventually(func(g Gomega) {
			after = readLedger(g, db, tokenID)
			g.Expect(after.leases).To(BeZero())
			g.Expect(after.remain + after.used).To(Equal(quota))
		}, replicaLeaseTTL+replicaSweepEvery+5*time.Second, 100*time.Millisecond).Should(Succeed(),
			"the lease is swept within the TTL (%s) + the sweep interval (%s)", replicaLeaseTTL, replicaSweepEvery)
		back := time.Since(killed)
		g.Expect(after.used).To(Equal(before.used), "the served request stays charged, once")
		g.Expect(after.rows).To(HaveLen(1))
		for _, r := range []*process{witness, replicas[2]} {
			remain, used := keyBalance(g, r.base, a.Key)
			g.Expect(remain+used).To(Equal(quota), "GET /v1/balance on %s", r.name)
			g.Expect(remain).To(Equal(after.remain), "no lease left for GET /v1/balance to add")
		}
		figures(t, "lease", "lease of %s held %d quota at the kill; returned %s after the SIGKILL (TTL %s, sweep every %s); key: remain %d + used %d = %d",
			victim.name, before.leased, back.Round(100*time.Millisecond), replicaLeaseTTL, replicaSweepEvery, after.remain, after.used, quota)
	})
})

// process is a child process of the test: the manager or one gateway replica.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	base   string        // a gateway's http://host:port
	dir    string        // a gateway's data directory (MODELGATE_SPOOL_DIR)
}

func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kill SIGKILLs the process and waits until it has exited.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// startProcess runs the modelgate binary with args and extra environment,
// logging to a file; it is killed when the test ends.
func startProcess(t testing.TB, bin, name string, extraEnv []string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, p.tail())
		}
	})
	return p
}

var listeningRE = regexp.MustCompile(`"msg":"gateway listening".*"addr":"([^"]+)"`)

// startReplicaCluster starts three `modelgate gateway` processes
// (replica-a, -b and -c, each with its own spool directory) and one
// `modelgate manager` on one fresh PostgreSQL database and a control plane of
// its own (the suite's stack runs its controllers on a SQLite ledger, and
// they would register these tenants there), and waits until every replica
// is ready. The returned database reads the ledger directly.
func startReplicaCluster(t testing.TB) (*sql.DB, *framework.Env, []*process) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t) // skips (fails under CI=true) without PostgreSQL
	db, err := sql.Open("pgx", dsn)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = db.Close() })
	bin := buildBinary(t)

	env, err := framework.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := writeKubeconfig(t, env)
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.SystemNamespace}})).To(Succeed())

	startProcess(t, bin, "manager", nil, "manager", "--kubeconfig", kubeconfig, "--database", dsn,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--lease-sweep-interval="+replicaSweepEvery.String())
	var replicas []*process
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		replicas = append(replicas, startReplica(t, bin, name, kubeconfig, dsn))
	}
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() { r.waitReady(t) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return db, env, replicas
}

// startReplica runs `modelgate gateway` as replica name (POD_NAME, which
// names its leases and its spool) with a data directory of its own.
func startReplica(t testing.TB, bin, name, kubeconfig, dsn string) *process {
	t.Helper()
	dir := t.TempDir()
	p := startProcess(t, bin, name,
		[]string{"POD_NAME=" + name, "MODELGATE_SPOOL_DIR=" + dir, "MODELGATE_BLOB_SIGNING_KEY=replicas-test-signing-key"},
		"gateway", "--kubeconfig", kubeconfig, "--database", dsn, "--listen", "127.0.0.1:0",
		"--metrics-bind-address=0", "--lease-ttl="+replicaLeaseTTL.String())
	p.dir = dir
	return p
}

// waitReady finds the address a gateway listens on in its log and waits
// until its /readyz answers 200. It may run on any goroutine.
func (p *process) waitReady(t testing.TB) {
	defer GinkgoRecover() // a failed spec's assertion panics
	log := func() string { return fmt.Sprintf("%s at %q; log:\n%s", p.name, p.base, p.tail()) }
	NewWithT(t).Eventually(func(g Gomega) {
		select {
		case <-p.exited:
			StopTrying("exited before it was ready: " + log()).Now()
		default:
		}
		if p.base == "" {
			m := listeningRE.FindStringSubmatch(p.tail())
			g.Expect(m).NotTo(BeNil(), "did not start listening")
			p.base = "http://" + m[1]
		}
		resp, err := http.Get(p.base + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "not ready")
	}, framework.LongTimeout, 50*time.Millisecond).Should(Succeed(), log)
}

// writeKubeconfig makes an admin user on env's API server and writes its
// kubeconfig for the child processes.
func writeKubeconfig(t testing.TB, env *framework.Env) string {
	t.Helper()
	g := NewWithT(t)
	user, err := env.Environment.AddUser(envtest.User{Name: "replicas-test", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())
	return path
}

// waitModelListed waits until every replica knows the key and lists model
// for it (each replica's informer cache catches up on its own).
func waitModelListed(t testing.TB, replicas []*process, key, model string) {
	t.Helper()
	g := NewWithT(t)
	for _, r := range replicas {
		g.Eventually(func(g Gomega) {
			req, _ := http.NewRequest("GET", r.base+"/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			var body map[string]any
			g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
			g.Expect(ids(body)).To(ContainElement(model))
		}, framework.Timeout, framework.Interval).Should(Succeed(), "%s never listed %s", r.name, model)
	}
}

// burstResult is what a burst of requests got.
type burstResult struct {
	statuses    map[int]int
	byReplica   map[string]map[int]int
	served      map[string]bool // request IDs of 200s with a complete message
	incomplete  int             // 200s whose body was not a complete message
	badRefusals []string        // refusals not in the insufficient-quota shape
	// capped holds, by request ID, the x-modelgate-output-cap of a 200 that
	// had its output cap lowered, and outputs every 200's output tokens.
	capped, outputs map[string]int64
}

// burstOver sends n concurrent POST /v1/messages with max_tokens 64,
// request i to replica i mod len(replicas), released together.
func burstOver(t testing.TB, replicas []*process, key, model string, n int) burstResult {
	t.Helper()
	return burstOverCapped(t, replicas, key, model, n, 64)
}

// burstOverCapped is burstOver with max_tokens maxTokens.
func burstOverCapped(t testing.TB, replicas []*process, key, model string, n int, maxTokens int64) burstResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": "Say hello in one short sentence."}}})
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	res := burstResult{statuses: map[int]int{}, byReplica: map[string]map[int]int{}, served: map[string]bool{},
		capped: map[string]int64{}, outputs: map[string]int64{}}
	for _, r := range replicas {
		res.byReplica[r.name] = map[int]int{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		r := replicas[i%len(replicas)]
		wg.Go(func() {
			defer GinkgoRecover() // t.Errorf of a spec fails it by a panic
			<-start
			req, _ := http.NewRequest("POST", r.base+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("request to %s: %v", r.name, err)
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			mu.Lock()
			defer mu.Unlock()
			res.statuses[resp.StatusCode]++
			res.byReplica[r.name][resp.StatusCode]++
			switch resp.StatusCode {
			case http.StatusOK:
				var msg struct {
					Type       string `json:"type"`
					StopReason string `json:"stop_reason"`
					Usage      struct {
						OutputTokens int64 `json:"output_tokens"`
					} `json:"usage"`
				}
				if err != nil || json.Unmarshal(raw, &msg) != nil || msg.Type != "message" || msg.StopReason == "" {
					res.incomplete++
					return
				}
				id := resp.Header.Get("x-request-id")
				res.served[id] = true
				res.outputs[id] = msg.Usage.OutputTokens
				if v := resp.Header.Get("x-modelgate-output-cap"); v != "" {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Errorf("x-modelgate-output-cap %q: %v", v, err)
					}
					res.capped[id] = n
				}
			case http.StatusBadRequest:
				var e struct {
					Type  string `json:"type"`
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if json.Unmarshal(raw, &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
					!strings.HasPrefix(e.Error.Message, "insufficient quota") {
					res.badRefusals = append(res.badRefusals, string(raw))
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return res
}

// ledgerFigures are a token's figures read from the PostgreSQL ledger.
type ledgerFigures struct {
	remain, used  int64            // tokens.remain_quota, tokens.used_quota
	leases        int              // lease rows on the token
	leased        int64            // quota they hold
	leaseReplicas []string         // the replicas holding them
	rows          map[string]int64 // usage rows: request ID → quota
	rowQuota      int64            // their sum
}

func readLedger(g Gomega, db *sql.DB, tokenID int64) ledgerFigures {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l ledgerFigures
	g.Expect(db.QueryRowContext(ctx, `SELECT remain_quota, used_quota FROM tokens WHERE token_id = $1`, tokenID).
		Scan(&l.remain, &l.used)).To(Succeed())
	rows, err := db.QueryContext(ctx, `SELECT replica_id, remaining FROM leases WHERE token_id = $1 ORDER BY replica_id`, tokenID)
	g.Expect(err).NotTo(HaveOccurred())
	for rows.Next() {
		var replica string
		var remaining int64
		g.Expect(rows.Scan(&replica, &remaining)).To(Succeed())
		l.leases++
		l.leased += remaining
		l.leaseReplicas = append(l.leaseReplicas, replica)
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT request_id, quota FROM usage_logs WHERE token_id = $1`, tokenID)
	g.Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	l.rows = map[string]int64{}
	for rows.Next() {
		var id string
		var quota int64
		g.Expect(rows.Scan(&id, &quota)).To(Succeed())
		l.rows[id] = quota
		l.rowQuota += quota
	}
	g.Expect(rows.Err()).NotTo(HaveOccurred())
	return l
}
