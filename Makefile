# modelgate — the developer interface. `make` alone prints this help.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

BIN            ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(BIN)/controller-gen
GOLANGCI_LINT  ?= $(BIN)/golangci-lint
HELM           ?= $(BIN)/helm
GO_TEST_FLAGS  ?= -count=1 -timeout 20m
DEV_FLAGS      ?=
# Extra flags for golangci-lint, e.g. GOLANGCI_LINT_FLAGS="--concurrency 2" on a
# shared machine.
GOLANGCI_LINT_FLAGS ?=
# What `make manifests generate` writes; `make verify` checks it is committed.
GENERATED_PATHS := api config charts

export PATH := $(BIN):$(PATH)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: dev
dev: build envtest ## Start the whole system on its embedded defaults (local control plane, SQLite, simulated models).
	$(BIN)/modelgate dev $(DEV_FLAGS)

.PHONY: generate
generate: controller-gen ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC into config/ and copy the CRDs into the chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=modelgate-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
	@mkdir -p charts/modelgate/crds && cp config/crd/bases/*.yaml charts/modelgate/crds/

.PHONY: verify
verify: manifests generate helm-lint ## Regenerate and fail when generated files differ from the committed ones; go.mod tidy; helm lint.
	@git diff --exit-code -- $(GENERATED_PATHS) || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@new=$$(git ls-files --others --exclude-standard -- $(GENERATED_PATHS)); if [ -n "$$new" ]; then echo "generated files not committed:"; echo "$$new"; exit 1; fi
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }

.PHONY: lint
lint: golangci-lint ## The docs check (hack/check-docs.sh), the API reference's lint (gateway/http/openapi: valid OpenAPI 3.1, every route documented), go vet, a gofmt check and golangci-lint (.golangci.yml: linters and package layering rules).
	@hack/check-docs.sh
	go test -count=1 -run 'TestDocumentIsValidOpenAPI31|TestEveryRouteIsDocumented' ./gateway/http/openapi/
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run $(GOLANGCI_LINT_FLAGS) ./...

##@ Build and test

.PHONY: build
build: ## Build bin/modelgate.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/modelgate .

.PHONY: test
test: envtest agents lint ## Lint, then run every test: unit, envtest suites, end to end with the real coding agents (the gateway's packages under the race detector), each fuzz target briefly. Leaves generated files alone (see verify).
	KUBEBUILDER_ASSETS="$$(hack/tools.sh envtest-dir)" MODELGATE_AGENTS_DIR="$$(hack/tools.sh agents-dir)" go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/gateway/')
	@$(MAKE) --no-print-directory test-race
	@$(MAKE) --no-print-directory fuzz

.PHONY: test-race
test-race: envtest ## The gateway's packages under the race detector (part of make test).
	KUBEBUILDER_ASSETS="$$(hack/tools.sh envtest-dir)" go test -race $(GO_TEST_FLAGS) ./gateway/...

# `make fuzz` runs every native fuzz target of the module (hack/fuzz.sh finds
# them with `go test -list`) for FUZZTIME each, on top of its checked-in
# corpus (testdata/fuzz).
FUZZTIME ?= 3s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 3s) each: parsers, translators, SSE decoders.
	@FUZZTIME=$(FUZZTIME) hack/fuzz.sh

##@ Tools (pinned, installed into bin/)

.PHONY: controller-gen
controller-gen: ## Install controller-gen.
	@hack/tools.sh controller-gen

.PHONY: golangci-lint
golangci-lint: ## Install golangci-lint.
	@hack/tools.sh golangci-lint

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd from the Go module proxy (once; cached).
	@hack/tools.sh envtest >/dev/null

.PHONY: agents
agents: ## Install Claude Code and the Codex CLI from npm (pinned) for the end-to-end suite.
	@hack/tools.sh agents >/dev/null

.PHONY: helm
helm: ## Install helm.
	@hack/tools.sh helm

##@ Deployment

.PHONY: kustomize
kustomize: ## Install kustomize.
	@hack/tools.sh kustomize

.PHONY: helm-lint
helm-lint: helm ## Lint charts/modelgate with default and with full values (test/deploy applies them to envtest).
	$(HELM) lint charts/modelgate --strict
	$(HELM) lint charts/modelgate --strict -f test/deploy/testdata/full-values.yaml

##@ Performance

BENCH_FLAGS ?=

.PHONY: bench
bench: envtest ## Load harness: fake upstream, bare reverse proxy and the full gateway (a replica per usage durability: disk, process) under the same load (docs/performance.md). BENCH_FLAGS="-d 20s -cpuprofile /tmp/prof" etc.
	KUBEBUILDER_ASSETS="$$(hack/tools.sh envtest-dir)" go run ./test/bench/cmd/loadbench $(BENCH_FLAGS)

.PHONY: bench-scale
bench-scale: ## Scale check: SCALE million usage rows (default 10) seeded into a throwaway PostgreSQL; the usage reads' latency and the ingest rate (docs/performance.md).
	go run ./test/bench/cmd/loadbench -scale $(or $(SCALE),10) $(BENCH_FLAGS)

.PHONY: bench-streams
bench-streams: envtest ## Many slow streams (N=10000) held open through the bare proxy and `modelgate dev`, each in its own process: memory per open stream. UPSTREAM_TLS=1 (HTTPS, HTTP/2 upstream), CLIENT_H2C=1 (h2c clients).
	test/bench/streams.sh

.PHONY: bench-wrk
bench-wrk: envtest ## The external check: bare proxy and `modelgate dev` in processes of their own under wrk (needs wrk). ROUNDS=5 DURABILITY=process etc.
	test/bench/wrk.sh
