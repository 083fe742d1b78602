#!/usr/bin/env bash
# The many-streams measurement with every target in a process of its own:
# a slow fake upstream (benchserve -chunk-delay), the bare
# httputil.ReverseProxy and `modelgate dev`, each holding N streams open at
# once (test/bench/cmd/openstreams); reports what each proxy's process holds
# per open stream, live (heap and stacks after a collection) and resident.
#
#   make bench-streams                 N=10000 streams (fewer if the open-file limit says so)
#   N=2000 CHUNK_DELAY=5s make bench-streams
#   MODELGATE=/path/to/modelgate make bench-streams   another build of the gateway
#   PROFILES=/tmp/p make bench-streams   heap profiles before and at the peak (go tool pprof -base)
#   UPSTREAM_TLS=1 make bench-streams    the upstream over HTTPS with HTTP/2 offered, as the
#                                        vendors' APIs are (both proxies negotiate it)
#   CLIENT_H2C=1 make bench-streams      the clients speak HTTP/2 without TLS (prior knowledge),
#                                        as an h2c-capable ingress in front of the gateway does
#   SETTLE=0 make bench-streams          measure as soon as the last stream is open (default 5s:
#                                        every stream has received a chunk after its first and
#                                        waits between events, as a long stream does)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-10000} CHUNK_DELAY=${CHUNK_DELAY:-3s} SETTLE=${SETTLE:-5s}
UP_ADDR=${UP_ADDR:-127.0.0.1:18191} PX_ADDR=${PX_ADDR:-127.0.0.1:18192} GW_ADDR=${GW_ADDR:-127.0.0.1:18190}
PX_PPROF=127.0.0.1:18193 GW_PPROF=127.0.0.1:18194

# The gateway holds two descriptors per stream (client and upstream side).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ $((2 * N + 400)) -gt "$hard" ]; then
  echo "open files limited to $hard per process: $(((hard - 400) / 2)) streams instead of $N" >&2
  N=$(((hard - 400) / 2))
fi

. "$ROOT/test/bench/lib.sh"
build_targets
go build -o "$work/openstreams" ./test/bench/cmd/openstreams
up_url=http://$UP_ADDR up_flags=() upstream_is="plain HTTP/1.1"
if [ -n "${UPSTREAM_TLS:-}" ]; then
  # Both proxies trust the upstream's own certificate through SSL_CERT_FILE.
  up_url=https://$UP_ADDR up_flags=(-tls-cert "$work/upstream.pem") upstream_is="HTTPS, HTTP/2 offered"
  export SSL_CERT_FILE=$work/upstream.pem
fi
"$work/benchserve" -role upstream -listen "$UP_ADDR" -chunk-delay "$CHUNK_DELAY" "${up_flags[@]}" >"$work/upstream.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do [ -s "$work/upstream.log" ] && break; sleep 0.1; done
"$work/benchserve" -role proxy -listen "$PX_ADDR" -target "$up_url" -pprof "$PX_PPROF" >"$work/proxy.log" 2>&1 & pids+=($!); px_pid=$!
start_dev "$up_url" "$GW_ADDR" -pprof-bind-address "$GW_PPROF"

client_flags=() client_is="HTTP/1.1"
[ -n "${CLIENT_H2C:-}" ] && client_flags=(-h2c) client_is="HTTP/2 without TLS"
echo "$N slow streams (a chunk every $CHUNK_DELAY) held open at once, measured $SETTLE after the last opened, clients $client_is, upstream $upstream_is, each target in its own process, $(date -u '+%F %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| target | streams open | live memory per stream (heap and stacks after a GC) | resident per stream | resident before → at peak | errors |"
echo "|---|---:|---:|---:|---:|---|"
"$work/openstreams" -name "bare ReverseProxy" -url "http://$PX_ADDR/v1/chat/completions" -key "$key" -n "$N" -settle "$SETTLE" -pprof "http://$PX_PPROF" -pid "$px_pid" "${client_flags[@]}" ${PROFILES:+-profiles "$PROFILES"}
sleep 2 # the proxy hangs up its upstream streams at once
"$work/openstreams" -name "modelgate" -url "http://$GW_ADDR/v1/chat/completions" -key "$key" -n "$N" -settle "$SETTLE" -pprof "http://$GW_PPROF" -pid "$gw_pid" "${client_flags[@]}" ${PROFILES:+-profiles "$PROFILES"}
echo
echo "Live: the process's Go heap in use plus goroutine stacks, after a forced collection, at the peak minus before the first stream. Resident: VmRSS, which also holds the collector's headroom (GOGC) and memory not yet returned to the system."
