// Command openstreams is the many-streams measurement against a target in
// another process (test/bench/streams.sh): it holds N slow streams open
// through the target at once and reports what the target's process holds
// for them, live (Go heap and stacks after a collection, read from the
// target's pprof endpoint) and resident (VmRSS), each per open stream.
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
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/test/bench"
)

func main() {
	var (
		target = flag.String("name", "target", "the target's name in the report")
		url    = flag.String("url", "", "the chat completions URL to stream from")
		key    = flag.String("key", "", "API key (Bearer)")
		model  = flag.String("model", "bench-chat", "model")
		n      = flag.Int("n", 10000, "streams to hold open at once")
		ramp   = flag.Int("ramp", 256, "streams being opened at a time")
		settle = flag.Duration("settle", 0, "with every stream open, wait this long before the peak measurement")
		pprof  = flag.String("pprof", "", "the target's pprof base URL (http://host:port), for its live memory")
		pid    = flag.Int("pid", 0, "the target's process ID, for its resident memory")
		h2c    = flag.Bool("h2c", false, "speak HTTP/2 without TLS (prior knowledge), many streams a connection")
		profs  = flag.String("profiles", "", "save the target's heap profiles before and at the peak into this directory (go tool pprof -base)")
	)
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *url == "" || *pid == 0 {
		log.Fatal("-url and -pid are required")
	}
	limit := int(bench.RaiseOpenFiles(uint64(*n + 512)))
	if *n+512 > limit {
		log.Printf("open files limited to %d: %d streams instead of %d", limit, limit-512, *n)
		*n = limit - 512
	}
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":64,"stream":true}`, *model)
	newReq := func(*rand.Rand) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, *url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+*key)
		return req, nil
	}
	var before, peak sample
	snapshot := func(stage string) {
		s, err := measure(*pprof, *pid)
		if err != nil {
			log.Fatalf("measure %s: %v", stage, err)
		}
		if *profs != "" && *pprof != "" {
			saveProfile(*pprof, filepath.Join(*profs, strings.ReplaceAll(*target, " ", "-")+"-"+stage+".heap"))
		}
		if stage == "before" {
			before = s
		} else {
			peak = s
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	if *h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	client := &http.Client{Transport: tr}
	r := bench.OpenStreams{N: *n, Ramp: *ramp, Client: client, NewRequest: newReq, Abandon: true, Settle: *settle, Snapshot: snapshot}.Run(context.Background())
	if r.Opened == 0 {
		log.Fatalf("%s: no stream opened: %v", *target, r.Errors)
	}
	per := func(a, b uint64) string {
		return fmt.Sprintf("%.1f KiB", (float64(b)-float64(a))/1024/float64(r.Opened))
	}
	live := "—"
	if *pprof != "" {
		live = per(before.heap+before.stacks, peak.heap+peak.stacks) + " (stacks " + per(before.stacks, peak.stacks) + ")"
	}
	fmt.Printf("| %s | %d of %d | %s | %s | %.0f → %.0f MiB | %v |\n", *target, r.Opened, *n, live, per(before.rss, peak.rss),
		float64(before.rss)/(1<<20), float64(peak.rss)/(1<<20), r.Errors)
}

// sample is a target process's memory at one moment.
type sample struct{ heap, stacks, rss uint64 }

var (
	heapInuse  = regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`)
	stackInuse = regexp.MustCompile(`(?m)^# Stack = (\d+) /`)
	vmRSS      = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`)
)

// measure reads the target's live memory after a collection (twice: the
// second sees what the first freed) from its heap profile's MemStats, and
// its resident set from /proc.
func measure(pprof string, pid int) (sample, error) {
	var s sample
	if pprof != "" {
		var text string
		for range 2 {
			t, err := get(pprof + "/debug/pprof/heap?gc=1&debug=1")
			if err != nil {
				return s, err
			}
			text = t
		}
		s.heap, s.stacks = number(heapInuse, text), number(stackInuse, text)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	s.rss = number(vmRSS, string(status)) << 10
	return s, nil
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// saveProfile writes the target's heap profile into path (a failure is
// reported and the measurement goes on).
func saveProfile(pprof, path string) {
	b, err := get(pprof + "/debug/pprof/heap")
	if err == nil {
		err = os.WriteFile(path, []byte(b), 0o600)
	}
	if err != nil {
		log.Printf("heap profile: %v", err)
	}
}

func number(re *regexp.Regexp, text string) uint64 {
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}
