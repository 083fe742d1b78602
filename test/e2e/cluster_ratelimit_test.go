package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/test/framework"
)

// clusterRateTolerance is the documented tolerance of a cluster-wide limit
// (docs/reliability.md): a window admits the limit within 5 %. The ledger
// never grants more than the limit; what the test sees beyond it is requests
// sent in one window and admitted in the next.
const clusterRateTolerance = 0.05

var _ = Describe("Cluster-wide rate limits", Serial, Ordered, Label("replicas", "postgres", "process"), func() {
	// Three `modelgate gateway` processes and one `modelgate manager` on one
	// PostgreSQL ledger and one control plane, as in "Three gateway replicas
	// on one PostgreSQL". A key limited to 600 requests a minute is driven at
	// three times that, round-robin over the replicas, for just over a
	// minute: every minute window admits 600 within the tolerance between the
	// replicas (each replica's own bucket would admit all 1 800), and the
	// refused get 429 with a Retry-After no later than the window's end.
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
		db, env, replicas = startReplicaCluster(t)
		model = uniqueModel("sim-cluster-limits")
		textModelOn(t, env, framework.SystemNamespace, model, sim("sim", "simulated"))
	})

	It("admit a key's requests per minute once across three replicas", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		const limit = 600
		a := newAccountOn(t, env, v1.TenantSpec{}, v1.ApiTokenSpec{RequestsPerMinute: limit})
		waitModelListed(t, replicas, a.Key, model)

		shots := drive(t, replicas, a.Key, model, 3*limit, 62*time.Second)

		admitted := map[time.Time]int{} // by the window the request was sent in
		covered := map[time.Time]time.Duration{}
		var first, last time.Time
		for _, s := range shots {
			if first.IsZero() || s.sent.Before(first) {
				first = s.sent
			}
			if s.sent.After(last) {
				last = s.sent
			}
		}
		for w := first.Truncate(ratelimit.Window); !w.After(last); w = w.Add(ratelimit.Window) {
			from, to := w, w.Add(ratelimit.Window)
			if first.After(from) {
				from = first
			}
			if last.Before(to) {
				to = last
			}
			covered[w] = to.Sub(from)
		}
		statuses := map[int]int{}
		for _, s := range shots {
			g.Expect(s.err).NotTo(HaveOccurred())
			statuses[s.status]++
			w := s.sent.Truncate(ratelimit.Window)
			switch s.status {
			case http.StatusOK:
				admitted[w]++
			case http.StatusTooManyRequests:
				g.Expect(s.body).To(ContainSubstring(`"rate_limit_error"`), "429 in the Messages shape")
				g.Expect(s.body).To(ContainSubstring("the key's requests-per-minute"))
				ra, err := strconv.Atoi(s.retryAfter)
				g.Expect(err).NotTo(HaveOccurred(), "Retry-After %q", s.retryAfter)
				g.Expect(ra).To(BeNumerically(">", 0))
				bound := int(ratelimit.Window / time.Second)
				if s.answered.Truncate(ratelimit.Window).Equal(w) { // refused in the window it was sent in
					bound = int(math.Ceil(w.Add(ratelimit.Window).Sub(s.sent).Seconds()))
				}
				g.Expect(ra).To(BeNumerically("<=", bound), "Retry-After no later than the window's end (sent %s)", s.sent.Format(time.StampMilli))
			default:
				Fail("unexpected status " + strconv.Itoa(s.status) + ": " + s.body)
			}
		}
		figures(t, "cluster rate limit", "%d requests at %d/min over %d replicas: statuses %v; admitted by window %v (covered %v)",
			len(shots), 3*limit, len(replicas), statuses, admitted, covered)

		tol := int(math.Ceil(limit * clusterRateTolerance))
		full := 0
		for w, n := range admitted {
			g.Expect(n).To(BeNumerically("<=", limit+tol), "window %s admitted more than the limit", w.Format(time.TimeOnly))
			// At three times the limit a window is spent after a third of it;
			// one covered for half of it or more must be spent.
			if covered[w] >= ratelimit.Window/2 {
				full++
				g.Expect(n).To(BeNumerically(">=", limit-tol), "window %s was driven for %s", w.Format(time.TimeOnly), covered[w])
			}
		}
		g.Expect(full).To(BeNumerically(">=", 1), "a run of over a minute drives one window for half of it or more")

		// The ledger's shares are the invariant: no window granted more than
		// the limit between the replicas.
		rows, err := db.QueryContext(context.Background(),
			`SELECT window_start, granted FROM rate_windows WHERE subject = $1`, "req/"+a.Token.Namespace+"/"+a.Token.Name)
		g.Expect(err).NotTo(HaveOccurred())
		defer rows.Close()
		windows := 0
		for rows.Next() {
			var start, granted int64
			g.Expect(rows.Scan(&start, &granted)).To(Succeed())
			g.Expect(granted).To(BeNumerically("<=", limit), "window %s", time.Unix(start, 0).Format(time.TimeOnly))
			windows++
		}
		g.Expect(rows.Err()).NotTo(HaveOccurred())
		g.Expect(windows).To(BeNumerically(">=", 2))
	})
})

// shot is one request of drive.
type shot struct {
	sent, answered time.Time
	status         int
	retryAfter     string
	body           string
	err            error
}

// drive sends POST /v1/messages at perMinute for d, round-robin over the
// replicas, each request on its own goroutine so that slow answers do not
// slow the rate, and returns every request's outcome.
func drive(t testing.TB, replicas []*process, key, model string, perMinute int, d time.Duration) []shot {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 16,
		"messages": []map[string]any{{"role": "user", "content": "x"}}})
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var (
		mu    sync.Mutex
		shots []shot
		wg    sync.WaitGroup
	)
	tick := time.NewTicker(time.Minute / time.Duration(perMinute))
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		r := replicas[i%len(replicas)]
		wg.Go(func() {
			s := shot{sent: time.Now()}
			req, _ := http.NewRequest("POST", r.base+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			resp, err := client.Do(req)
			s.answered = time.Now()
			if err != nil {
				s.err = err
			} else {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				s.status, s.retryAfter, s.body = resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(raw))
			}
			mu.Lock()
			shots = append(shots, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return shots
}
