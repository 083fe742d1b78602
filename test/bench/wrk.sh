#!/usr/bin/env bash
# The external check of the gateway against the bare reverse proxy: every
# target in a process of its own and wrk as the load generator, as an
# outside reviewer measures it (docs/performance.md, "make bench-wrk: separate processes").
#
#   test/bench/wrk.sh                      # 3 rounds x json,stream, 8 s each
#   ROUNDS=5 DURATION=10 CONNS=50 DURABILITY=process test/bench/wrk.sh
#   MODELGATE=/path/to/other/modelgate test/bench/wrk.sh   # another build
#
# Targets: the fake upstream (benchserve -role upstream), the bare
# httputil.ReverseProxy in front of it (benchserve -role proxy) and
# `modelgate dev` (control plane, controllers, SQLite ledger, gateway) with
# a route to the same upstream. Rounds alternate proxy and gateway so a
# change in the machine's load falls on both. Per target and round: req/s,
# p50, p99 and the CPU time of the target's process per request.
# Needs wrk (apt-get install wrk) and the envtest binaries (make envtest).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-8} CONNS=${CONNS:-50} THREADS=${THREADS:-2}
DURABILITY=${DURABILITY:-disk} MODES=${MODES:-json stream}
UP_ADDR=${UP_ADDR:-127.0.0.1:18091} PX_ADDR=${PX_ADDR:-127.0.0.1:18092} GW_ADDR=${GW_ADDR:-127.0.0.1:18090}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }

. "$ROOT/test/bench/lib.sh"
build_targets
"$work/benchserve" -role upstream -listen "$UP_ADDR" >"$work/upstream.log" 2>&1 & pids+=($!)
"$work/benchserve" -role proxy -listen "$PX_ADDR" -target "http://$UP_ADDR" >"$work/proxy.log" 2>&1 & pids+=($!); px_pid=$!
start_dev "$UP_ADDR" "$GW_ADDR" -usage-durability "$DURABILITY"

for mode in json stream; do
  stream=false; [ "$mode" = stream ] && stream='true,"stream_options":{"include_usage":true}'
  cat >"$work/$mode.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"model":"bench-chat","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":64,"stream":$stream}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
LUA
done

tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# syscalls PID: the read and write system calls the process has made.
syscalls() { awk '/^sysc[rw]:/{n+=$2} END{print n}' "/proc/$1/io"; }
# run TARGET PID MODE: one wrk phase, printed as a table row.
run() {
  local name=$1 pid=$2 addr=$3 mode=$4 t0 t1 s0 s1 out n
  t0=$(cpu_ticks "$pid") s0=$(syscalls "$pid")
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$work/$mode.lua" "http://$addr/v1/chat/completions")
  t1=$(cpu_ticks "$pid") s1=$(syscalls "$pid")
  n=$(awk '/requests in/{print $1}' <<<"$out")
  if grep -q "Non-2xx" <<<"$out"; then echo "$name $mode: failed requests" >&2; echo "$out" >&2; exit 1; fi
  printf '| %s | %s | %s | %s | %s | %s | %d µs | %s |\n' "$mode" "$round" "$name" \
    "$(awk '/Requests\/sec/{printf "%.0f", $2}' <<<"$out")" "$(awk '$1=="50%"{print $2}' <<<"$out")" \
    "$(awk '$1=="99%"{print $2}' <<<"$out")" $(( (t1 - t0) * 1000000 / tck / n )) "$(awk -v s=$((s1 - s0)) -v n="$n" 'BEGIN{printf "%.1f", s/n}')"
}

echo "wrk -t$THREADS -c$CONNS -d${DURATION}s, $ROUNDS rounds, usage durability $DURABILITY, $(date -u '+%F %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| mode | round | target | req/s | p50 | p99 | CPU/req of its process | reads and writes/req |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
for mode in $MODES; do
  # one unmeasured second each to open connections and warm the caches
  wrk -t1 -c"$CONNS" -d1s -s "$work/$mode.lua" "http://$PX_ADDR/v1/chat/completions" >/dev/null
  wrk -t1 -c"$CONNS" -d1s -s "$work/$mode.lua" "http://$GW_ADDR/v1/chat/completions" >/dev/null
  for round in $(seq "$ROUNDS"); do
    run "bare ReverseProxy" "$px_pid" "$PX_ADDR" "$mode"
    run "modelgate" "$gw_pid" "$GW_ADDR" "$mode"
  done
done
