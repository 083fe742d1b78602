// Command loadbench is modelgate's load harness (make bench). In one run it
// starts a fast fake OpenAI-compatible upstream, a bare
// net/http/httputil.ReverseProxy in front of it, and the whole stack (envtest
// control plane, ledger with usage logging, controllers, gateway) loaded with
// many tokens and routes, with a gateway replica per usage durability
// (-usage-durability, default both: disk and process); drives them all
// with the same bounded concurrent load, non-streaming and streaming;
// prints requests/s and latency percentiles, each gateway's added latency
// and its throughput relative to the bare proxy; and checks that every
// successful gateway request left exactly one usage row in the ledger. It
// exits non-zero on any failed request, a missing row, or a setup error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/gateway/usagelog"
	"github.com/modelgate/modelgate/test/bench"
)

type row struct {
	target, mode string
	gateway      bool
	r            bench.Result
	cpu          time.Duration // this process's CPU time during the measured rounds
	// controlPlane is the CPU time kube-apiserver and etcd used during
	// the same rounds: a load on the machine that this process's figures
	// do not show, and that must fall on every target alike.
	controlPlane time.Duration
}

// cpuTime is the CPU time (user + system) this process has used so far:
// gateway, controllers, bare proxy, fake upstream and load generator
// together (kube-apiserver and etcd are other processes).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerReq is the process CPU time per successful request.
func (r row) cpuPerReq() time.Duration {
	if r.r.OK == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.r.OK)
}

func main() {
	var (
		conc       = flag.Int("c", 50, "concurrent clients")
		dur        = flag.Duration("d", 10*time.Second, "duration of each measured phase")
		n          = flag.Int("n", 0, "at most this many requests per phase (0: duration only)")
		tokens     = flag.Int("tokens", 10000, "ApiTokens to load")
		routes     = flag.Int("routes", 1000, "ModelRoutes (and PriceRules) to load")
		tenants    = flag.Int("tenants", 100, "Tenants the tokens are spread over")
		writers    = flag.Int("writers", 64, "concurrent API-server writers while loading objects")
		chunks     = flag.Int("chunks", 20, "content chunks per streamed answer")
		chunkDelay = flag.Duration("chunk-delay", 0, "upstream delay between streamed chunks")
		dsn        = flag.String("dsn", "", "ledger DSN (default: SQLite in a temp dir), e.g. postgres://user:pw@host/db")
		syncPeriod = flag.Duration("sync-period", 0, "controllers' ledger mirror period (0: production default)")
		profDir    = flag.String("cpuprofile", "", "write CPU profiles of every target's rounds (upstream-, proxy-, gateway-MODE-ROUND.pprof; and heap profiles at the peak of mode open) into this directory")
		modes      = flag.String("modes", "json,stream", "comma-separated: json, stream, open (many slow streams held open at once: memory per stream)")
		openN      = flag.Int("open-streams", 10000, "streams held open at once in mode open")
		rounds     = flag.Int("rounds", 5, "split each target's measured time into this many rounds, cycling through the targets")
		warm       = flag.Bool("warmup", true, "send one gateway request per token before measuring (takes each token's quota lease)")
		timeout    = flag.Duration("timeout", 25*time.Minute, "abort the whole run after this long")
		verbose    = flag.Bool("v", false, "controller and gateway logs")
		durability = flag.String("usage-durability", "disk,process", "comma-separated --usage-durability values (disk, process): one gateway replica each, measured side by side")
		scale      = flag.Float64("scale", 0, "scale check instead of the load: seed this many million usage rows (10 for the documented check) into PostgreSQL (-dsn, or a throwaway server) and report the usage reads' latency and the ingest rate")
	)
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *verbose {
		ctrllog.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	durable, err := parseDurabilities(*durability)
	if err != nil {
		log.Printf("FAIL: %v", err)
		os.Exit(2)
	}
	timer := time.AfterFunc(*timeout, func() { log.Printf("FAIL: run exceeded -timeout %s", *timeout); os.Exit(2) })
	defer timer.Stop()
	if *scale > 0 {
		if err := runScale(*scale, *dsn, *tenants); err != nil {
			log.Printf("FAIL: %v", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*conc, *dur, *n, *tokens, *routes, *tenants, *writers, *chunks, *chunkDelay, *dsn, *syncPeriod,
		*profDir, strings.Split(*modes, ","), max(*rounds, 1), *warm, *verbose, durable, *openN); err != nil {
		log.Printf("FAIL: %v", err)
		os.Exit(1)
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func run(conc int, dur time.Duration, n, nTokens, nRoutes, nTenants, writers, chunks int, chunkDelay time.Duration,
	dsn string, syncPeriod time.Duration, profDir string, modes []string, rounds int, warm, verbose bool, durable []gatewayTarget,
	openN int) (err error) {
	ctx := context.Background()
	log.Printf("loadbench: %s, GOMAXPROCS %d, NumCPU %d, load average %s", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), loadavg())

	up, err := bench.StartUpstream(bench.UpstreamOptions{Chunks: chunks, ChunkDelay: chunkDelay})
	if err != nil {
		return err
	}
	defer up.Close()
	rp, err := bench.StartReverseProxy(up.URL)
	if err != nil {
		return err
	}
	defer rp.Close()

	dir, err := bench.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	begin := time.Now()
	var more []usagelog.Durability
	for _, g := range durable[1:] {
		more = append(more, g.durability)
	}
	st, err := bench.StartStack(bench.StackOptions{DSN: dsn, Dir: dir, SyncPeriod: syncPeriod,
		UsageDurability: durable[0].durability, MoreDurabilities: more})
	if err != nil {
		return fmt.Errorf("start stack: %w", err)
	}
	defer func() {
		if serr := st.Stop(); serr != nil && err == nil && verbose {
			log.Printf("stop: %v", serr)
		}
	}()
	ledgerName := "SQLite (" + filepath.Join(dir, "ledger.db") + ")"
	if dsn != "" {
		ledgerName = "PostgreSQL"
	}
	gatewayURLs := append([]string{st.BaseURL}, st.MoreURLs...)
	log.Printf("stack up in %s: gateways %s, ledger %s", time.Since(begin).Round(time.Millisecond), strings.Join(gatewayURLs, " "), ledgerName)
	seeded, err := bench.Seed(ctx, st, bench.SeedOptions{Tenants: nTenants, Tokens: nTokens, Routes: nRoutes,
		Writers: writers, UpstreamURL: up.URL, Log: log.Printf})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	rowsBefore, err := bench.CountUsageRows(ctx, st.DSN)
	if err != nil {
		return fmt.Errorf("count usage rows: %w", err)
	}

	// The same request for every target: a random key and a random model.
	bodies := map[bool][][]byte{}
	for _, stream := range []bool{false, true} {
		for _, m := range seeded.Models {
			s := ""
			if stream {
				s = `,"stream":true,"stream_options":{"include_usage":true}`
			}
			bodies[stream] = append(bodies[stream], []byte(`{"model":"`+m+
				`","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":64`+s+`}`))
		}
	}
	newReq := func(base string, stream bool) func(*rand.Rand) (*http.Request, error) {
		url := base + "/v1/chat/completions"
		bs := bodies[stream]
		return func(rng *rand.Rand) (*http.Request, error) {
			body := bs[rng.IntN(len(bs))]
			req, err := http.NewRequest(http.MethodPost, url, bytesReader(body))
			if err != nil {
				return nil, err
			}
			req.ContentLength = int64(len(body))
			req.Header["Content-Type"] = []string{"application/json"}
			req.Header["Authorization"] = []string{seeded.Keys[rng.IntN(len(seeded.Keys))]}
			return req, nil
		}
	}
	var gateways []target
	for i, g := range durable {
		gateways = append(gateways, target{name: g.name, base: gatewayURLs[i], profile: g.profile, client: bench.NewClient(), gateway: true})
	}
	targets := append([]target{
		{name: "upstream direct", base: up.URL, profile: "upstream", client: bench.NewClient()},
		{name: "bare ReverseProxy", base: rp.URL, profile: "proxy", client: bench.NewClient()},
	}, gateways...)
	var gatewayOK int64
	var failed int

	if warm {
		// One request per token and gateway, in order: each token's first
		// request takes its quota lease (one per replica) from the ledger
		// (a database round trip, by design); the measured phases then see
		// the steady state.
		for _, g := range gateways {
			begin := time.Now()
			var next int
			keys := seeded.Keys
			res := bench.Load{Concurrency: conc, Duration: 10 * time.Minute, Requests: len(keys), Client: g.client,
				NewRequest: func(rng *rand.Rand) (*http.Request, error) {
					req, err := newReq(g.base, false)(rng)
					if err == nil {
						req.Header["Authorization"] = []string{keys[nextIndex(&next, len(keys))]}
					}
					return req, err
				}}.Run(ctx)
			gatewayOK += int64(res.OK)
			failed += res.Failed
			log.Printf("warm-up, %s: %d gateway requests (one per token) in %s, %.0f req/s, %d failed %s", g.name,
				res.OK, time.Since(begin).Round(time.Millisecond), res.RPS(), res.Failed, res.ErrorSummary())
		}
	}

	// Each mode's measured time per target is split into rounds that cycle
	// through the targets, so a change in the machine's load during the run
	// (other jobs, the controllers' periodic mirror) falls on all targets
	// alike instead of on whichever phase it happens to hit.
	var rows []row
	var opens []openRow
	// perRound: each gateway's rate over the bare proxy's in each round of
	// a mode, by mode and gateway: the run's own measure of its spread.
	perRound := map[string]map[string][]float64{}
	for _, mode := range modes {
		if mode == "open" {
			for _, t := range targets {
				r := openStreams(ctx, t.name, t.base, up, newReq, openN, profDir)
				if t.gateway {
					gatewayOK += int64(r.Completed)
				}
				for _, c := range r.Errors {
					failed += c
				}
				opens = append(opens, openRow{t.name, r})
			}
			continue
		}
		stream := mode == "stream"
		merged := map[string]*bench.Result{}
		cpu, controlPlane := map[string]time.Duration{}, map[string]time.Duration{}
		loads := map[string]string{}
		for _, t := range targets {
			// A short unmeasured run first: connections open, caches warm.
			wr := bench.Load{Concurrency: conc, Duration: time.Second, Client: t.client,
				NewRequest: newReq(t.base, stream), Stream: stream}.Run(ctx)
			if t.gateway {
				gatewayOK += int64(wr.OK)
			}
			failed += wr.Failed
			merged[t.name] = &bench.Result{Errors: map[string]int{}}
		}
		perRound[mode] = map[string][]float64{}
		for round := range rounds {
			rps := map[string]float64{}
			for _, t := range targets {
				l := bench.Load{Concurrency: conc, Duration: dur / time.Duration(rounds), Client: t.client,
					NewRequest: newReq(t.base, stream), Stream: stream}
				if n > 0 {
					l.Requests = (n + rounds - 1) / rounds
				}
				var stop func()
				if profDir != "" {
					if stop, err = startProfile(profDir, fmt.Sprintf("%s-%s-%d", t.profile, mode, round+1)); err != nil {
						return err
					}
				}
				if round == 0 {
					loads[t.name] = loadavg()
				}
				cpu0, cp0 := cpuTime(), childrenCPU()
				r := l.Run(ctx)
				cpu[t.name] += cpuTime() - cpu0
				controlPlane[t.name] += childrenCPU() - cp0
				if stop != nil {
					stop()
				}
				if t.gateway {
					gatewayOK += int64(r.OK)
				}
				failed += r.Failed
				merged[t.name].Merge(r)
				rps[t.name] = r.RPS()
			}
			if p := rps["bare ReverseProxy"]; p > 0 {
				for _, g := range gateways {
					perRound[mode][g.name] = append(perRound[mode][g.name], rps[g.name]/p)
				}
			}
		}
		for _, t := range targets {
			r := *merged[t.name]
			rw := row{t.name, mode, t.gateway, r, cpu[t.name], controlPlane[t.name]}
			log.Printf("%-19s %-6s %8.0f req/s  p50 %-9s p99 %-9s CPU/req %-8s ok %d failed %d  (load avg %s) %s", t.name, mode, r.RPS(),
				r.Pct(50).Round(time.Microsecond), r.Pct(99).Round(time.Microsecond), rw.cpuPerReq().Round(time.Microsecond),
				r.OK, r.Failed, loads[t.name], r.ErrorSummary())
			rows = append(rows, rw)
		}
	}

	// Every successful gateway request must have left exactly one usage row.
	var got int64
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := bench.CountUsageRows(ctx, st.DSN)
		if err != nil {
			return fmt.Errorf("count usage rows: %w", err)
		}
		got = c - rowsBefore
		if got >= gatewayOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	fmt.Println()
	fmt.Printf("modelgate loadbench — %s, %d concurrent clients, %s per target and mode in %d rounds, %d tokens, %d routes, %d stream chunks, ledger %s, load average now %s\n\n",
		time.Now().Format("2006-01-02 15:04 MST"), conc, dur, rounds, nTokens, nRoutes, chunks, strings.SplitN(ledgerName, " ", 2)[0], loadavg())
	if len(rows) > 0 {
		fmt.Println("| target | mode | req/s | p50 | p99 | CPU/req | added p50 | added p99 | added CPU/req vs bare proxy | % of bare proxy req/s | API server + etcd CPU in its rounds |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		find := func(name, mode string) row {
			for _, r := range rows {
				if r.target == name && r.mode == mode {
					return r
				}
			}
			return row{}
		}
		for _, r := range rows {
			add50, add99, addCPU, pct := "", "", "", ""
			if r.gateway {
				d, p := find("upstream direct", r.mode), find("bare ReverseProxy", r.mode)
				add50 = ms(r.r.Pct(50) - d.r.Pct(50))
				add99 = ms(r.r.Pct(99) - d.r.Pct(99))
				addCPU = us(r.cpuPerReq() - p.cpuPerReq())
				pct = fmt.Sprintf("%.0f%%", 100*r.r.RPS()/p.r.RPS())
			}
			fmt.Printf("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %.1f s |\n", r.target, r.mode, r.r.RPS(), ms(r.r.Pct(50)), ms(r.r.Pct(99)),
				us(r.cpuPerReq()), add50, add99, addCPU, pct, r.controlPlane.Seconds())
		}
	}
	for _, mode := range modes {
		for _, g := range gateways {
			if r := perRound[mode][g.name]; len(r) > 0 {
				fmt.Printf("\n%s ÷ bare proxy req/s, %s, per round: %s (min %.0f%%, max %.0f%%)", g.name, mode, percents(r), 100*slices.Min(r), 100*slices.Max(r))
			}
		}
	}
	fmt.Println()
	printOpens(opens)
	fmt.Println("\nCPU/req: this process's CPU time (gateway, controllers, bare proxy, fake upstream and load generator) per successful request of the phase.")
	fmt.Println("API server + etcd CPU: what the control plane's processes took from the machine during the target's rounds; a target whose rounds it hit harder had less CPU to serve with (docs/performance.md, \"Reading the table\").")
	fmt.Printf("\nusage rows: %d successful gateway requests (warm-up included), %d new usage rows in the ledger", gatewayOK, got)
	switch got {
	case gatewayOK:
		fmt.Println(" — none dropped")
	default:
		fmt.Println(" — MISMATCH")
	}
	if got != gatewayOK {
		return fmt.Errorf("%d successful gateway requests but %d usage rows", gatewayOK, got)
	}
	if failed > 0 {
		return fmt.Errorf("%d requests failed", failed)
	}
	return nil
}

// percents formats ratios as percentages.
func percents(r []float64) string {
	out := make([]string, len(r))
	for i, x := range r {
		out[i] = fmt.Sprintf("%.0f%%", 100*x)
	}
	return strings.Join(out, ", ")
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// nextIndex hands out 0..n-1 in order to concurrent workers.
func nextIndex(p *int, n int) int {
	mu.Lock()
	defer mu.Unlock()
	i := *p % n
	*p++
	return i
}

// target is one server under load: the fake upstream, the bare proxy or a
// gateway replica.
type target struct {
	name, base string
	profile    string // in profile file names
	client     *http.Client
	gateway    bool
}

// gatewayTarget is a gateway replica under load and its usage durability.
type gatewayTarget struct {
	name       string // "modelgate (disk)"
	profile    string // in profile file names: gateway (the first), gateway-process (the others)
	durability usagelog.Durability
}

// parseDurabilities reads -usage-durability: a gateway target per value.
func parseDurabilities(list string) ([]gatewayTarget, error) {
	var out []gatewayTarget
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		d, err := usagelog.ParseDurability(v)
		if err != nil {
			return nil, err
		}
		if v == "" {
			v = "disk"
		}
		g := gatewayTarget{name: "modelgate (" + v + ")", profile: "gateway", durability: d}
		if len(out) > 0 {
			g.profile = "gateway-" + v
		}
		if slices.ContainsFunc(out, func(o gatewayTarget) bool { return o.name == g.name }) {
			return nil, fmt.Errorf("usage durability %q given twice", v)
		}
		out = append(out, g)
	}
	return out, nil
}

// startProfile starts a CPU profile of the whole process into DIR/NAME.pprof.
func startProfile(dir, name string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		log.Printf("CPU profile (whole process: load generator, target, fake upstream, controllers) written to %s", path)
	}, nil
}
