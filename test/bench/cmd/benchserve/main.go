// Command benchserve runs one target of the load harness in a process of
// its own, for an external load generator (test/bench/wrk.sh): the fake
// upstream or the bare reverse proxy. It prints its URL and serves until
// interrupted.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // served only with -pprof
	"os"
	"os/signal"
	"syscall"

	"github.com/modelgate/modelgate/test/bench"
)

func main() {
	role := flag.String("role", "upstream", "upstream (the fake OpenAI-compatible upstream) or proxy (the bare httputil.ReverseProxy)")
	addr := flag.String("listen", "127.0.0.1:0", "address to listen on")
	target := flag.String("target", "", "proxy: the upstream URL")
	chunkDelay := flag.Duration("chunk-delay", 0, "upstream: delay between streamed chunks (slow streams)")
	certFile := flag.String("tls-cert", "", "upstream: serve HTTPS (HTTP/2 by ALPN) with net/http/httptest's certificate, written here in PEM for the clients to trust")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address (the many-streams measurement reads the heap profile)")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Fatal(http.ListenAndServe(*pprofAddr, nil)) }() //nolint:gosec // a benchmark's loopback endpoint
	}
	var url string
	switch *role {
	case "upstream":
		u, err := bench.StartUpstream(bench.UpstreamOptions{Addr: *addr, ChunkDelay: *chunkDelay, CertFile: *certFile})
		if err != nil {
			log.Fatal(err)
		}
		url = u.URL
	case "proxy":
		p, err := bench.StartReverseProxyOn(*addr, *target)
		if err != nil {
			log.Fatal(err)
		}
		url = p.URL
	default:
		log.Fatalf("unknown role %q", *role)
	}
	fmt.Println(url)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
