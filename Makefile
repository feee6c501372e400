# Portico developer entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN ?= bin
# Packages whose tests need nothing but Go (no root, no control plane, no network lab).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/e2e')
E2E_PKGS  = ./e2e/...
GOTEST_FLAGS ?= -count=1
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# VERSION is what the binaries print with --version (internal/version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: help prereqs build generate test test-unit test-e2e bench bench-scale lint tools demo clean-lab

help: ## list the targets
	@grep -E '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

prereqs: ## check, and as root on Debian install, what tests and demo need: Debian packages, moto's server
	$(GO) run ./e2e/tools/prereqs

build: ## build every binary into ./bin, stamped with the version git describe gives (--version)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags "-X github.com/portico-lb/portico/internal/version.version=$(VERSION)" -o $(BIN)/ ./cmd/...

generate: ## regenerate deepcopy code and CRD manifests (deploy/crds) from api/
	$(GO) run $(CONTROLLER_GEN) object paths=./api/... crd paths=./api/... output:crd:artifacts:config=deploy/crds

tools: ## build (or find in the cache) kube-apiserver, kube-controller-manager, kube-proxy and etcd
	$(GO) run ./e2e/tools/k8sbin

test: prereqs lint tools test-unit test-e2e ## everything CI runs

test-unit: prereqs ## fast tests: parsing, models, rendering (the iptables round trip needs root)
	$(GO) test $(GOTEST_FLAGS) $(UNIT_PKGS)

test-e2e: prereqs tools ## tests against the real control plane and network lab (root)
	$(GO) test $(GOTEST_FLAGS) -timeout 60m $(E2E_PKGS)
	$(GO) test $(GOTEST_FLAGS) -tags moto -timeout 20m ./providers/aws/ # the provider against moto's server

bench: prereqs tools ## benchmarks side by side with the anchors, short sizes
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m $(E2E_PKGS)
	$(GO) test -run '^$$' -bench LinkCut -benchtime 1x -timeout 20m ./nodeproxy/announce/bgp/

bench-scale: prereqs tools ## the 10,000-Service agent benchmark against kube-proxy (long: object creation alone takes minutes)
	PORTICO_BENCH_SCALE=1 $(GO) test -run '^$$' -bench 'BenchmarkSync/services=10000' -benchtime 1x -timeout 120m ./e2e/agent/

lint: ## gofmt, go vet, staticcheck
	@files=$$(git ls-files '*.go') && [ -n "$$files" ] || { echo "lint: git ls-files listed no Go files (make prereqs installs git)"; exit 1; }; \
	out=$$(gofmt -l $$files); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

DEMO ?= baremetal
demo: prereqs tools ## a network lab + control plane + portico-controller and portico-agent: VIP traffic, bad input reported, clean up; DEMO=aws: an NLB and a Classic ELB in moto's AWS emulator
	$(GO) run ./e2e/tools/demo -provider=$(DEMO)

clean-lab: ## remove network-lab namespaces and links left by an interrupted test run
	$(GO) run ./e2e/tools/netlab-sweep
