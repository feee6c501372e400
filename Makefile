# Portico developer entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN ?= bin
# The rule: `make test-unit` needs nothing but Go: no root, no control plane, no network lab,
# no bird, no moto. A test outside e2e/ that needs any of them carries the build tag e2e
# (`//go:build e2e`, e.g. nodeproxy/announce/bgp's lab, nodeproxy/rules' iptables round trip)
# or moto (providers/aws against moto); `make test-e2e` runs those packages with the tag, so
# `make test` runs every test. internal/prereq's TestUnitTestsNeedNoMachine holds the rule.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/e2e')
E2E_PKGS  = ./e2e/...
# Packages outside e2e/ with tests behind the e2e build tag.
E2E_TAGGED_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' '^//go:build e2e$$' --exclude-dir=e2e .)))
GOTEST_FLAGS ?= -count=1
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# VERSION is what the binaries print with --version (internal/version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: help prereqs build images push chart generate docs test test-unit test-e2e bench bench-scale lint tools demo clean-lab conformance

help: ## list the targets
	@grep -E '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

prereqs: ## check, and as root on Debian install, what tests and demo need: Debian packages, moto's server
	$(GO) run ./e2e/tools/prereqs

build: ## build every binary into ./bin (portico-agent without GoBGP, portico-agent-bgp with it, as in the image), stamped with the version git describe gives (--version)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags "-X github.com/portico-lb/portico/internal/version.version=$(VERSION)" -o $(BIN)/ ./cmd/...
	CGO_ENABLED=0 $(GO) build -ldflags "-X github.com/portico-lb/portico/internal/version.version=$(VERSION)" -o $(BIN)/portico-agent-bgp ./cmd/portico-agent
	CGO_ENABLED=0 $(GO) build -tags portico_nobgp -ldflags "-X github.com/portico-lb/portico/internal/version.version=$(VERSION)" -o $(BIN)/portico-agent ./cmd/portico-agent

images: ## build the container images as OCI archives into $(BIN)/images, tagged $(VERSION) (no Docker, no registry; e2e/tools/images)
	$(GO) run ./e2e/tools/images -version $(VERSION) -out $(BIN)/images

push: ## build the images for linux/amd64 and linux/arm64 and push them (an index per component, an SBOM per image) and the chart (oci://REGISTRY/charts/portico) to REGISTRY=host:port[/prefix], tagged $(VERSION); INSECURE=1: plain HTTP (e2e/tools/push)
	@[ -n "$(REGISTRY)" ] || { echo "push: set REGISTRY=host:port[/prefix]"; exit 1; }
	$(GO) run ./e2e/tools/push -registry $(REGISTRY) -version $(VERSION) $(if $(INSECURE),-insecure)

chart: ## render the plain manifests in deploy/ (and the chart's CRDs) from the Helm chart deploy/chart/portico
	$(GO) test ./deploy -run TestRenderedManifests -update -count=1

generate: ## regenerate deepcopy code and CRD manifests (deploy/crds) from api/
	$(GO) run $(CONTROLLER_GEN) object paths=./api/... crd paths=./api/... output:crd:artifacts:config=deploy/crds

docs: ## regenerate the generated references: docs/configuration.md (flags, chart values), docs/annotations.md, docs/aws.md's annotation table
	$(GO) run ./internal/configref/gen
	$(GO) test ./annotations -run TestReferenceUpToDate -update -count=1
	$(GO) test ./providers/aws -run TestDocsTable -update -count=1

tools: ## build (or find in the cache) kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubelet, etcd and CoreDNS
	$(GO) run ./e2e/tools/k8sbin

test: prereqs lint tools test-unit test-e2e ## everything CI runs

test-unit: ## tests that need nothing but Go: no root, no control plane, no network lab (tests that do carry the e2e or moto build tag)
	$(GO) test $(GOTEST_FLAGS) -timeout 30m $(UNIT_PKGS) # cmd's test builds the three binaries: minutes on a cold, loaded machine

test-e2e: prereqs tools ## as root: e2e/ and the e2e-tagged tests (real control plane, network lab, bird), and providers/aws against moto
	$(GO) test $(GOTEST_FLAGS) -tags e2e -timeout 60m $(E2E_PKGS) $(E2E_TAGGED_PKGS)
	$(GO) test $(GOTEST_FLAGS) -tags moto -timeout 20m ./providers/aws/ # the provider against moto's server

bench: prereqs tools ## benchmarks side by side with the anchors, short sizes
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m $(E2E_PKGS)
	$(GO) test -run '^$$' -bench LinkCut -benchtime 1x -tags e2e -timeout 20m ./nodeproxy/announce/bgp/

bench-scale: prereqs tools ## the 10,000-Service agent benchmark against kube-proxy (long: object creation alone takes minutes)
	PORTICO_BENCH_SCALE=1 $(GO) test -run '^$$' -bench 'BenchmarkSync/services=10000' -benchtime 1x -timeout 120m ./e2e/suites/dataplane/

lint: ## gofmt, go vet, staticcheck
	@files=$$(git ls-files '*.go') && [ -n "$$files" ] || { echo "lint: git ls-files listed no Go files (make prereqs installs git)"; exit 1; }; \
	out=$$(gofmt -l $$files); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags e2e,moto ./... # the tags build every test file too
	$(GO) run $(STATICCHECK) -tags e2e,moto ./...

CONFORMANCE_COLUMNS ?= portico,portico-bgp,iptables,nftables,portico-ipv6,portico-bgp-ipv6,iptables-ipv6,nftables-ipv6,iptables-announcer,nftables-announcer
CONFORMANCE_PROCS ?= 5
conformance: prereqs tools ## as root: the upstream e2e [sig-network] Services and LoadBalancers specs against Portico (L2; the LoadBalancers specs also BGP+ECMP), kube-proxy iptables and nftables, IPv4 and IPv6, and (LoadBalancers specs) kube-proxy with Portico as the announcer; the tables go into docs/conformance.md
	$(GO) run ./e2e/tools/conformance -selection full -columns $(CONFORMANCE_COLUMNS) -procs $(CONFORMANCE_PROCS) -doc docs/conformance.md

DEMO ?= baremetal
demo: prereqs tools ## a network lab + control plane + portico-controller and portico-agent: VIP traffic, bad input reported, clean up; DEMO=aws: an NLB and a Classic ELB in moto's AWS emulator; DEMO=cluster: helm install on a cluster of real kubelets (no kube-proxy), VIP from the LAN, helm upgrade under traffic, uninstall
	$(GO) run ./e2e/tools/demo -provider=$(DEMO)

clean-lab: ## remove network labs and kubelet-node leftovers (containers, shims, cgroups, state) of an interrupted test run
	$(GO) run ./e2e/tools/netlab-sweep
