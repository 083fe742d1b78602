package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/modelgate/modelgate/test/bench"
)

type openRow struct {
	target string
	r      bench.OpenResult
}

// openStreams holds n slow streams open through one target at once (the
// upstream stops after the first chunk until they are all open) and
// measures the memory they hold. Each stream needs two descriptors per
// loopback connection in this one process: four through a proxy.
func openStreams(ctx context.Context, target, base string, up *bench.Upstream,
	newReq func(string, bool) func(*rand.Rand) (*http.Request, error), n int, profDir string) bench.OpenResult {
	if limit := int(bench.RaiseOpenFiles(uint64(4*n + 4096))); 4*n+4096 > limit {
		m := max((limit-4096)/4, 1)
		log.Printf("open files limited to %d: %d streams instead of %d", limit, m, n)
		n = m
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}, Timeout: 5 * time.Minute}
	defer client.CloseIdleConnections()
	r := bench.OpenStreams{N: n, Ramp: 256, Client: client, NewRequest: newReq(base, true), Upstream: up, Snapshot: heapProfile(profDir, target)}.Run(ctx)
	log.Printf("%-17s open   %d of %d streams open in %s, %d completed: %.1f KiB (%.1f KiB of stacks) and %.1f goroutines per open stream %v",
		target, r.Opened, n, r.OpenTime.Round(time.Millisecond), r.Completed, float64(r.PerStream())/1024,
		float64(r.Stacks)/1024/float64(max(r.Opened, 1)), float64(r.Goroutines)/float64(max(r.Opened, 1)), r.Errors)
	return r
}

func printOpens(rows []openRow) {
	if len(rows) == 0 {
		return
	}
	var direct bench.OpenResult
	for _, o := range rows {
		if o.target == "upstream direct" {
			direct = o.r
		}
	}
	fmt.Println("\n| target | streams open | memory per open stream | goroutines per stream | over the upstream direct |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, o := range rows {
		over := ""
		if o.target != "upstream direct" {
			over = fmt.Sprintf("%.1f KiB", (float64(o.r.PerStream())-float64(direct.PerStream()))/1024)
		}
		fmt.Printf("| %s | %d | %.1f KiB | %.1f | %s |\n", o.target, o.r.Opened, float64(o.r.PerStream())/1024,
			float64(o.r.Goroutines)/float64(max(o.r.Opened, 1)), over)
	}
	fmt.Println("\nMemory: Go heap and stacks in use after a GC with every stream open, minus before, per stream; the process holds the load generator and the fake upstream too, so \"over the upstream direct\" is what the proxy in the middle adds.")
}

// heapProfile writes the heap profiles of mode open into
// dir/open-<target>-<stage>.heap (nil without a directory); `go tool pprof
// -base <before> <peak>` shows what the open streams hold.
func heapProfile(dir, target string) func(stage string) {
	if dir == "" {
		return nil
	}
	return func(stage string) {
		path := filepath.Join(dir, "open-"+strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(target)+"-"+stage+".heap")
		f, err := os.Create(path)
		if err == nil {
			err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			log.Printf("heap profile: %v", err)
		}
	}
}
