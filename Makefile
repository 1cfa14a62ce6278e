# Narad — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
NARAD := $(BIN)/narad
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO_PKGS := ./api/... ./broker/... ./operator/... ./test/...
FUZZTIME ?= 10000x
# staticcheck, pinned; `go run` fetches it through the module proxy on first use.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: all build operator run test unit blackbox fuzz fuzz-long bench lint proto proto-check doc-refs clean chaos manifests generate envtest kube-up kube-down kube-smoke kube-e2e-smoke e2e-kube

all: build

build: ## Build bin/narad
	$(GO) build -ldflags "$(LDFLAGS)" -o $(NARAD) ./broker/cmd/narad

operator: ## Build the operator (bin/narad-operator) and the kubectl plugin (bin/kubectl-narad)
	$(GO) build -o $(BIN)/narad-operator ./operator/cmd/manager
	$(GO) build -ldflags "-s -w" -o $(BIN)/kubectl-narad ./operator/cmd/kubectl-narad

run: build ## Single-node broker on 127.0.0.1:7942, data in ./.narad/data, auth off
	mkdir -p .narad/data
	$(NARAD) serve --dev --data-dir ./.narad/data

# Each stage of make test prints how long it took ("== make test: unit 512s"): the whole
# must stay under 30 minutes on a fresh machine.
STAGE = s=$$(date +%s); $(MAKE) $(1); rc=$$?; echo "== make test: $(1) $$(( $$(date +%s) - s ))s"; exit $$rc

test: build ## Everything: vet, unit tests with -race, short fuzz runs, black-box suites
	./hack/test-deps.sh
	./hack/setup-envtest.sh >/dev/null
	@$(call STAGE,lint)
	@$(call STAGE,unit)
	@$(call STAGE,fuzz)
	@$(call STAGE,blackbox)

# Test binaries are linked without DWARF (-ldflags=-w): it halves each link, and race reports
# and stack traces read the runtime's own tables, not DWARF.
unit:
	cd broker && $(GO) test -race -count=1 -timeout 15m -ldflags=-w ./...
	cd api && $(GO) test -race -count=1 -timeout 5m -ldflags=-w ./...
	assets="$$(./hack/setup-envtest.sh)" && cd operator && \
	  KUBEBUILDER_ASSETS="$$assets" NARAD_BIN=$(NARAD) $(GO) test -race -count=1 -timeout 15m -ldflags=-w ./...

blackbox: build ## Black-box suites on real processes (three concurrent jobs, see hack/blackbox.sh)
	assets="$$(./hack/setup-envtest.sh)" && KUBEBUILDER_ASSETS="$$assets" GO=$(GO) ./hack/blackbox.sh $(NARAD) -ldflags=-w

fuzz: ## Run every fuzz target briefly (FUZZTIME per target)
	./hack/fuzz.sh $(FUZZTIME)

fuzz-long:
	./hack/fuzz.sh 5m

bench: build ## Benchmarks against a fresh single node; writes docs/benchmarks.md
	./hack/bench.sh $(NARAD)

.PHONY: bench-compare
bench-compare: ## Two revisions side by side: BASE=<rev> [NEW=<rev>, default the working tree] [ROUNDS=3] [BENCH_MD=1]; see docs/benchmarks.md
	@BASE="$(BASE)" NEW="$(NEW)" ROUNDS="$(or $(ROUNDS),3)" BENCH_MD="$(BENCH_MD)" GO=$(GO) ./hack/bench-compare.sh

.PHONY: bench-replication
bench-replication: build ## Failover time and empty-follower catch-up on three fresh nodes (prints a docs/benchmarks.md section)
	./hack/bench-replication.sh $(NARAD)

.PHONY: bench-replication-cpu
bench-replication-cpu: build ## Cluster CPU per message and full-flow rate, R = 1 against R = 3, on three local nodes
	./hack/bench-replication-cpu.sh $(NARAD)

.PHONY: bench-nodes-cpu
bench-nodes-cpu: build ## Broker CPU per message of one node against three (R = 1), full flow
	./hack/bench-nodes-cpu.sh $(NARAD)

chaos: build ## Long crash/soak loops (not part of make test)
	./hack/test-deps.sh
	assets="$$(./hack/setup-envtest.sh)" && cd test && KUBEBUILDER_ASSETS="$$assets" \
	  NARAD_BIN=$(NARAD) NARAD_CHAOS=1 $(GO) test -count=1 -timeout 60m $$($(GO) list ./... | grep -v '/test/kube$$')

lint: ## go vet, staticcheck, gofmt, each module on its own (GOWORK=off), the CRD and protobuf drift checks, the doc-reference and version checks
	$(GO) vet $(GO_PKGS)
	GO=$(GO) ./hack/check-modules.sh
	$(STATICCHECK) $(GO_PKGS)
	@out=$$(gofmt -l api broker operator test hack/checkdocrefs); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	./hack/manifests.sh --check
	./hack/gen-proto.sh --check
	./hack/check-doc-refs.sh
	./hack/check-versions.sh

envtest: ## Build once (cached) and print the kube-apiserver/etcd directory for KUBEBUILDER_ASSETS
	@./hack/setup-envtest.sh

kube-up: ## A real single-node cluster (root; first run builds the node binaries, ~30 min); see docs/internals/kube-test-cluster.md
	./hack/kube-up.sh up

kube-down: ## Stop the kube-up cluster by PID and unmount everything (its data is kept)
	./hack/kube-down.sh

kube-smoke: ## On the kube-up cluster: a 2-replica narad StatefulSet on local volumes, a pod deleted and back
	./hack/kube/smoke.sh

kube-e2e-smoke: ## On the kube-up cluster: helm install of the operator, a NaradCluster of 3 Ready, a Topic, traffic through its Service
	./hack/kube/e2e-smoke.sh

e2e-kube: ## The real-cluster suite test/kube (root): kube-up (builds what it lacks), then the suite; not part of make test
	./hack/kube-up.sh up
	cd test && $(GO) test -count=1 -timeout 40m -v ./kube/

manifests generate: ## Regenerate the CRDs (config/crd/bases) and deepcopy code with controller-gen
	./hack/manifests.sh

proto: ## Regenerate node RPC code (installs protoc and plugins if missing)
	./hack/gen-proto.sh

proto-check: ## Fail if the committed node RPC code differs from what node.proto generates
	./hack/gen-proto.sh --check

doc-refs: ## Fail if a cited docs/ page or § section is missing, or code cites notes outside the repository
	./hack/check-doc-refs.sh

.PHONY: images
images: ## Broker and operator images tagged with VERSION, as OCI archives in bin/images (hack/images.sh)
	GO=$(GO) ./hack/images.sh

clean:
	@# A kube-up cluster mounts volumes under .narad/kube: stop it before deleting anything.
	if [ -d .narad/kube/pids ]; then ./hack/kube-down.sh; fi
	rm -rf $(BIN) .narad
