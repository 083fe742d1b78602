# Shared by the separate-process benchmarks (wrk.sh, streams.sh): a work
# directory and the processes started in it, stopped on exit; the builds;
# and `modelgate dev` on the bench samples. Source it after setting ROOT.

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# build_targets: benchserve into $work, and modelgate unless MODELGATE names
# another build; sets MODELGATE and assets (the envtest binaries).
build_targets() {
  cd "$ROOT"
  go build -o "$work/benchserve" ./test/bench/cmd/benchserve
  MODELGATE=${MODELGATE:-}
  if [ -z "$MODELGATE" ]; then
    go build -o "$work/modelgate" . && MODELGATE=$work/modelgate
  fi
  assets=$(hack/tools.sh envtest-dir)
}

# start_dev UPSTREAM GATEWAY_ADDR [modelgate dev flags...]: starts
# `modelgate dev` with test/bench/samples.yaml routed to the upstream
# (host:port, or a URL with its scheme) and waits for it; sets gw_pid and
# key (the dev API key).
start_dev() {
  local up=$1 listen=$2; shift 2
  case $up in *://*) ;; *) up=http://$up ;; esac
  mkdir -p "$work/samples"
  sed -e "s#@UPSTREAM@#$up/v1#" test/bench/samples.yaml >"$work/samples/bench.yaml"
  KUBEBUILDER_ASSETS=$assets "$MODELGATE" dev -data-dir "$work/dev" -samples-dir "$work/samples" -assets-dir "$assets" \
    -listen "$listen" "$@" >"$work/dev.log" 2>&1 & pids+=($!); gw_pid=$!
  for _ in $(seq 300); do
    [ -s "$work/dev/dev.json" ] && break
    kill -0 "$gw_pid" 2>/dev/null || { cat "$work/dev.log" >&2; exit 1; }
    sleep 0.5
  done
  key=$(sed -n 's/.*"apiKey": *"\([^"]*\)".*/\1/p' "$work/dev/dev.json")
  [ -n "$key" ] || { echo "modelgate dev did not start" >&2; tail -20 "$work/dev.log" >&2; exit 1; }
}
