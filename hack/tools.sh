#!/usr/bin/env bash
# Installs the pinned developer tools into bin/, idempotently.
#
#   hack/tools.sh controller-gen   bin/controller-gen
#   hack/tools.sh envtest          bin/k8s/<version>/{kube-apiserver,etcd}
#   hack/tools.sh golangci-lint    bin/golangci-lint
#   hack/tools.sh helm             bin/helm
#   hack/tools.sh kustomize        bin/kustomize
#   hack/tools.sh agents           bin/agents/<versions>/: Claude Code and the Codex CLI (npm)
#   hack/tools.sh agents-dir       prints that directory
#   hack/tools.sh all
#
# The envtest control plane cannot be downloaded here, so kube-apiserver and
# etcd are built from the Go module proxy (see docs/development.md). A built
# binary is also kept in a per-user cache (MODELGATE_TOOLS_CACHE, default
# ~/.cache/modelgate/tools) so that a fresh clone on the same machine copies it
# instead of rebuilding for minutes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
CACHE=${MODELGATE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelgate/tools}

CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.23.0}
# golangci-lint v2.15.0 needs go >= 1.26 and supports go 1.26 code.
GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# kustomize v5.8.3 needs go >= 1.27.
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.8.2}
# The coding agents the end-to-end suite runs against the gateway, from the
# npm registry (both packages carry native binaries).
CLAUDE_CODE_VERSION=${CLAUDE_CODE_VERSION:-2.1.328}
CODEX_VERSION=${CODEX_VERSION:-0.169.0}
AGENTS_DIR=$BIN/agents/claude-code-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION
KUBE_VERSION=${KUBE_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
ENVTEST_DIR=$BIN/k8s/$KUBE_VERSION

log() { printf '[tools] %s\n' "$*" >&2; }

# with_progress LABEL CMD...: runs CMD, printing elapsed time every 15 s so a
# slow build does not look hung. Output of CMD goes to a log file shown on failure.
with_progress() {
  local label=$1; shift
  local logf; logf=$(mktemp)
  local start=$SECONDS
  "$@" >"$logf" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( (SECONDS - start) % 15 == 0 )); then
      log "$label: still building ($((SECONDS - start))s)"
    fi
  done
  if ! wait "$pid"; then
    log "$label: FAILED after $((SECONDS - start))s; last lines of the build log:"
    tail -40 "$logf" >&2
    rm -f "$logf"
    return 1
  fi
  rm -f "$logf"
  log "$label: built in $((SECONDS - start))s"
}

# from_cache NAME DEST: copies a cached binary into DEST if the cache has it.
from_cache() {
  local name=$1 dest=$2
  if [[ -x $CACHE/$name ]]; then
    mkdir -p "$(dirname "$dest")"
    cp "$CACHE/$name" "$dest.tmp" && mv "$dest.tmp" "$dest"
    log "$(basename "$dest"): copied from $CACHE/$name"
    return 0
  fi
  return 1
}

to_cache() {
  local src=$1 name=$2
  mkdir -p "$(dirname "$CACHE/$name")"
  cp "$src" "$CACHE/$name.tmp" && mv "$CACHE/$name.tmp" "$CACHE/$name" || true
}

go_install() { # go_install NAME PKG VERSION
  local name=$1 pkg=$2 version=$3
  local dest=$BIN/$name-$version
  if [[ ! -x $dest ]]; then
    from_cache "$name-$version" "$dest" || {
      log "installing $name $version"
      local tmp; tmp=$(mktemp -d)
      with_progress "$name" env GOBIN="$tmp" go install "$pkg@$version"
      mkdir -p "$BIN"; mv "$tmp/$name" "$dest"; rm -rf "$tmp"
      to_cache "$dest" "$name-$version"
    }
  fi
  ln -sf "$name-$version" "$BIN/$name"
}

# build_from_module OUT MODULE@VERSION PKG REPLACE_PREFIX REPLACE_VERSION
# Builds PKG in a throwaway module that requires MODULE@VERSION and replaces
# every local "=> ./staging/..." style replace of its go.mod with the published
# module at REPLACE_VERSION.
build_from_module() {
  local out=$1 modver=$2 pkg=$3 replace_version=$4
  local mod=${modver%@*}
  local work; work=$(mktemp -d)
  local gomod
  gomod=$(cd "$work" && go mod download -json "$modver" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module build"
    echo "go 1.26"
    echo "require $mod ${modver#*@}"
    echo "replace ("
    # Lines like: k8s.io/api => ./staging/src/k8s.io/api
    grep -E '^\s*[^ ]+ => \./' "$gomod" | awk -v v="$replace_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$work/go.mod"
  printf '//go:build tools\n\npackage build\n\nimport _ "%s"\n' "$pkg" >"$work/tools.go"
  (cd "$work" && go mod tidy >/dev/null 2>&1 || go mod tidy)
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out" "$pkg")
  rm -rf "$work"
}

envtest() {
  mkdir -p "$ENVTEST_DIR"
  local kas=$ENVTEST_DIR/kube-apiserver etcd=$ENVTEST_DIR/etcd
  if [[ ! -x $kas ]]; then
    from_cache "k8s/$KUBE_VERSION/kube-apiserver" "$kas" || {
      log "building kube-apiserver v$KUBE_VERSION from the Go module proxy (about 5 minutes on 2 cores, once)"
      with_progress kube-apiserver build_from_module "$kas.tmp" "k8s.io/kubernetes@v$KUBE_VERSION" \
        k8s.io/kubernetes/cmd/kube-apiserver "v0.${KUBE_VERSION#*.}"
      mv "$kas.tmp" "$kas"
      to_cache "$kas" "k8s/$KUBE_VERSION/kube-apiserver"
    }
  fi
  if [[ ! -x $etcd ]]; then
    from_cache "k8s/$KUBE_VERSION/etcd-$ETCD_VERSION" "$etcd" || {
      log "building etcd v$ETCD_VERSION from the Go module proxy (about 1 minute, once)"
      with_progress etcd build_etcd "$etcd.tmp"
      mv "$etcd.tmp" "$etcd"
      to_cache "$etcd" "k8s/$KUBE_VERSION/etcd-$ETCD_VERSION"
    }
  fi
  echo "$ENVTEST_DIR"
}

build_etcd() {
  local out=$1 v=v$ETCD_VERSION
  local work; work=$(mktemp -d)
  cat >"$work/go.mod" <<MOD
module build
go 1.26
require go.etcd.io/etcd/server/v3 $v
replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $v
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $v
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $v
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $v
)
MOD
  printf '//go:build tools\n\npackage build\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$work/tools.go"
  (cd "$work" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out" go.etcd.io/etcd/server/v3)
  rm -rf "$work"
}

# agents installs the pinned Claude Code and Codex CLI into AGENTS_DIR
# (760 MB, mostly their native binaries). The per-user cache keeps one
# install, hard-linked into a fresh clone's bin/ (copied across file
# systems). Without npm it says so and installs nothing: the agent specs
# then skip, or fail under CI=true.
agents() {
  local done=$AGENTS_DIR/.installed name=agents/${AGENTS_DIR##*/}
  if [[ -f $done ]]; then echo "$AGENTS_DIR"; return; fi
  if [[ -f $CACHE/$name/.installed ]]; then
    mkdir -p "$(dirname "$AGENTS_DIR")"
    cp -al "$CACHE/$name" "$AGENTS_DIR" 2>/dev/null || cp -a "$CACHE/$name" "$AGENTS_DIR"
    log "agents: linked from $CACHE/$name"
    echo "$AGENTS_DIR"; return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    log "agents: npm not found; Claude Code and Codex are not installed (their end-to-end specs skip, or fail under CI=true)"
    return 0
  fi
  log "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION from npm"
  local tmp=$CACHE/$name.tmp
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$tmp" && echo '{"private":true}' >package.json &&
    npm install --no-fund --no-audit --loglevel=error --save-exact \
      "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2)
  touch "$tmp/.installed"
  rm -rf "${CACHE:?}/$name" && mv "$tmp" "$CACHE/$name"
  mkdir -p "$(dirname "$AGENTS_DIR")"
  cp -al "$CACHE/$name" "$AGENTS_DIR" 2>/dev/null || cp -a "$CACHE/$name" "$AGENTS_DIR"
  echo "$AGENTS_DIR"
}

case "${1:-all}" in
  controller-gen) go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION" ;;
  golangci-lint) go_install golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "$GOLANGCI_LINT_VERSION" ;;
  helm) go_install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" ;;
  kustomize) go_install kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION" ;;
  envtest) envtest ;;
  envtest-dir) echo "$ENVTEST_DIR" ;;
  agents) agents ;;
  agents-dir) echo "$AGENTS_DIR" ;;
  all)
    go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION"
    envtest >/dev/null
    ;;
  *) echo "usage: $0 controller-gen|golangci-lint|helm|kustomize|envtest|envtest-dir|agents|agents-dir|all" >&2; exit 2 ;;
esac
