package wire

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// pprofServer serves net/http/pprof on its own address, off by default: the
// profiles show request contents' shapes and timings, so they are for an
// operator on a private port (kubectl port-forward), never on the API
// listener. It runs on every replica, leader or not.
type pprofServer struct{ addr string }

func (p pprofServer) NeedLeaderElection() bool { return false }

func (p pprofServer) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

var _ manager.LeaderElectionRunnable = pprofServer{}
