# fleetlift — make help lists the targets.
SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
CUE_VERSION := v0.17.1
CONTROLLER_TOOLS_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
# What controller-gen makes from api/: deepcopy beside the types, the CRD
# under deploy/crds/bases.
CRD_DIR := deploy/crds/bases
ACTIONLINT_VERSION := v1.7.12
# The SBOM tool make dist runs on each binary it builds.
CYCLONEDX_GOMOD_VERSION := v1.10.0
# crane, with which make dist joins each image's platforms into one index
# and the release workflow pushes them.
CRANE_VERSION := v0.22.1
# multi-gitter, which bench-peer measures fleetlift against, pinned in
# bench/peer/multigitter/go.mod (one dependency raised there: see its
# comment).
MULTI_GITTER_VERSION := 0.63.1
# Fuzz budgets are counts of executions, not durations: go1.26's fuzz
# coordinator can fail a run with "context deadline exceeded" when a
# duration runs out under load (golang/go#75804, fixed in Go 1.27). About
# 20 s each here; FUZZ_LOAD=20s and the like for a timed run.
FUZZ_LOAD ?= 8000x
FUZZ_JSONSCHEMA ?= 80000x
# The version the images are tagged with, beside :dev: git describe, the one
# place it is set (make images VERSION=1.2.3 for a release).
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGES  := sandbox agent fleetlift
# Packages that are Linux's alone, left out of darwin's vet: the real
# node (namespaces, mounts, containerd) and the benchmarks that run on it
# or use prctl.
LINUX_ONLY := /internal/kubetest/node$$ -e /bench/kube$$ -e /bench/peer$$
# What `fleetlift version` names: the release, the commit and its date
# (the commit's, not the clock's, so that a build is reproducible).
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    := $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
# deploy/ is a module of its own: Argo CD's gitops-engine and Flux's ssa
# need Go 1.27, which the go command fetches as a toolchain module for that
# module's commands only; the main module stays on the machine's Go.
DEPLOY_GOTOOLCHAIN := go1.27.3

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_\/-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/fleetlift, bin/fleetlift-agent (the slim agent sandboxes run, with bin/fleetlift-jail, its jail entry point) and bin/fleetlift-controller (the Kubernetes sandbox controller)
	# The agent and its jail are static, as in the images and releases: a
	# sandbox starts an agent per task, and linked dynamically each start
	# took 0.6 ms more (4.4 against 3.8 ms for one that does nothing).
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-agent ./cmd/fleetlift-agent
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-jail ./cmd/fleetlift-jail
	$(GO) build -o $(BIN)/fleetlift-controller ./cmd/fleetlift-controller
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/fleetlift ./cmd/fleetlift

.PHONY: demo
demo: build ## The GitOps loop end to end: commit a campaign, it runs, commit approvals, branches appear, status mirror
	$(BIN)/fleetlift demo

.PHONY: test
test: lint lint-actions check-generated check-tidy $(BIN)/cyclonedx-gomod $(BIN)/crane bin/gitea bin/envtest bin/node build images ## Run every test: vet, format, actionlint, generated files, go.mod tidy, the binaries, the images, the envtest control plane, the real node (as root, with containerd), unit tests, short fuzz runs (needs a Docker engine: .ci/run starts one)
	$(GO) test -count=1 -timeout 30m ./...
	cd deploy/monitoring && $(GO) test -count=1 ./...
	cd deploy && GOTOOLCHAIN=$(DEPLOY_GOTOOLCHAIN) $(GO) test -count=1 -timeout 30m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZ_LOAD) ./internal/spec
	$(GO) test -run '^$$' -fuzz '^FuzzJSONSchema$$' -fuzztime $(FUZZ_JSONSCHEMA) ./internal/spec

.PHONY: test-deploy
test-deploy: bin/envtest bin/node bin/gitea build images ## Render deploy/'s overlays with kustomize and apply them to kube-apiserver with Argo CD's gitops-engine and Flux's ssa, and the production overlay to a real node where a campaign runs in sandbox pods (deploy/ module, Go 1.27; as root, with containerd)
	cd deploy && GOTOOLCHAIN=$(DEPLOY_GOTOOLCHAIN) $(GO) test -count=1 -timeout 30m ./...

.PHONY: test-node
test-node: bin/envtest bin/node build images ## Run only the real-node suite (part of make test): a Job, an OOM, the seccomp profile and a campaign whose sandboxes are pods (bin/fleetlift and bin/fleetlift-controller) on a kubelet with containerd (as root; needs containernetworking-plugins from Debian, and a Docker engine for the images)
	$(GO) test -count=1 -timeout 15m -v -run TestRealNode ./internal/kubetest/node

.PHONY: lint
lint: ## go vet (and for darwin/arm64, which the release has archives for), gofmt, and no command file over 400 lines
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet $$(GOOS=darwin $(GO) list ./... | grep -v -e $(LINUX_ONLY))
	cd deploy && GOTOOLCHAIN=$(DEPLOY_GOTOOLCHAIN) $(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@long=$$(for f in $$(git ls-files 'cmd/*.go' | grep -v '_test\.go$$'); do n=$$(wc -l <$$f); [ $$n -le 400 ] || echo "$$f: $$n lines"; done); \
	if [ -n "$$long" ]; then echo "commands are wiring: no file in cmd/ over 400 lines:"; echo "$$long"; exit 1; fi

.PHONY: lint-actions
lint-actions: $(BIN)/actionlint ## actionlint the release workflow and the campaigns template's GitHub and Gitea Actions workflows
	$(BIN)/actionlint .github/workflows/*.yml campaigns-template/.github/workflows/*.yml campaigns-template/.gitea/workflows/*.yml

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate the JSON Schema files from schemas/fleetlift.cue, and the API's deepcopy and CRD
	$(GO) generate ./schemas
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:dir=$(CRD_DIR)

.PHONY: check-generated
check-generated: $(CONTROLLER_GEN) ## Fail when the generated JSON Schema files, deepcopy or CRD are stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(GO) run ./schemas/gen -out $$tmp && \
	for f in $$tmp/*.json; do \
		diff -u schemas/$$(basename $$f) $$f || { echo "schemas/$$(basename $$f) is stale: run make generate"; exit 1; }; \
	done && \
	$(CONTROLLER_GEN) object paths=./api/... output:object:stdout >$$tmp/deepcopy.go && \
	{ diff -u api/v1alpha1/zz_generated.deepcopy.go $$tmp/deepcopy.go || { echo "api/v1alpha1/zz_generated.deepcopy.go is stale: run make generate"; exit 1; }; } && \
	mkdir $$tmp/crd && $(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:dir=$$tmp/crd && \
	{ diff -ru $(CRD_DIR) $$tmp/crd || { echo "$(CRD_DIR) is stale: run make generate"; exit 1; }; }

.PHONY: check-tidy
check-tidy: ## Fail when go.mod or go.sum is not tidy
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@cd deploy && GOTOOLCHAIN=$(DEPLOY_GOTOOLCHAIN) $(GO) mod tidy -diff || { echo "deploy/go.mod/go.sum are not tidy: run cd deploy && GOTOOLCHAIN=$(DEPLOY_GOTOOLCHAIN) go mod tidy"; exit 1; }
	@cd tools/agentsandbox && $(GO) mod tidy -diff || { echo "tools/agentsandbox/go.mod/go.sum are not tidy: run cd tools/agentsandbox && go mod tidy"; exit 1; }

.PHONY: verify
verify: generate ## Regenerate and tidy, then fail if anything changed
	$(GO) mod tidy
	git diff --exit-code -- go.mod go.sum schemas/ api/ $(CRD_DIR)

$(BIN)/cue:
	GOBIN=$(BIN) $(GO) install cuelang.org/go/cmd/cue@$(CUE_VERSION)

# controller-gen, versioned in its name so that a new pin installs anew.
$(CONTROLLER_GEN):
	GOBIN=$(BIN)/.controller-gen $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/.controller-gen/controller-gen $@ && rmdir $(BIN)/.controller-gen

# The binary's version is checked, so that a pin moved here reinstalls it.
$(BIN)/actionlint: FORCE
	@$@ -version 2>/dev/null | grep -qx '$(ACTIONLINT_VERSION)' || GOBIN=$(BIN) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

$(BIN)/cyclonedx-gomod: FORCE
	@$@ version 2>/dev/null | grep -qx 'Version:[[:space:]]*$(CYCLONEDX_GOMOD_VERSION)' || GOBIN=$(BIN) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

$(BIN)/crane: FORCE
	@$@ version 2>/dev/null | grep -qx '$(CRANE_VERSION)' || GOBIN=$(BIN) $(GO) install github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)

.PHONY: FORCE
FORCE:

.PHONY: tools
tools: $(BIN)/cue $(BIN)/actionlint $(BIN)/cyclonedx-gomod $(BIN)/crane $(CONTROLLER_GEN) ## Install pinned tools into ./bin

.PHONY: dist
dist: $(BIN)/cyclonedx-gomod $(BIN)/crane ## The release VERSION (make dist VERSION=v0.1.0) in dist/: archives for linux and darwin on amd64 and arm64, SBOMs, checksums (recorded for the setup-fleetlift action), provenance; the images for linux/amd64 and linux/arm64 as OCI layouts, and deploy/'s manifests pinned to their digests (a Docker engine, and QEMU for arm64: images/base.sh says how)
	CYCLONEDX_GOMOD=$(BIN)/cyclonedx-gomod build/release.sh $(VERSION)
	CRANE=$(BIN)/crane build/images.sh $(VERSION)

.PHONY: bench-run
bench-run: ## A deterministic change across 200 local repos: fleetlift (grouped, and one task per repo) vs a shell loop of clone, change, commit, push; RUN_FLAGS="-sandbox docker" for containers
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-agent ./cmd/fleetlift-agent
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-jail ./cmd/fleetlift-jail
	$(GO) run ./bench/run -repos 200 -parallel 8 -group 25 -rounds 5 -agent $(BIN)/fleetlift-agent $(RUN_FLAGS)

.PHONY: bench-chaos
bench-chaos: ## Crash-proofing (issue 11): SIGKILL fleetlift up and its agents at random moments, 5 modes x 3 rounds; CHAOS_FLAGS="-modes agents -rounds 1 -seed N", "-sandbox docker" for containers (after make images)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-agent ./cmd/fleetlift-agent
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fleetlift-jail ./cmd/fleetlift-jail
	$(GO) build -o $(BIN)/fleetlift ./cmd/fleetlift
	$(GO) run ./bench/chaos -bin $(BIN) $(CHAOS_FLAGS)

.PHONY: bench-peer
bench-peer: build bin/gitea $(BIN)/multi-gitter ## fleetlift vs multi-gitter v0.63.1 on a loopback Gitea: 50 repositories per round, 3 rounds, wall and whole-tree CPU; PEER_FLAGS="-repos 10 -rounds 1"
	$(GO) run ./bench/peer -bin $(BIN) $(PEER_FLAGS)

# The binary's version is checked, so that a pin moved here rebuilds it.
$(BIN)/multi-gitter: FORCE
	@$@ version 2>/dev/null | grep -qx 'multi-gitter version: $(MULTI_GITTER_VERSION)' || \
		(cd bench/peer/multigitter && $(GO) build -ldflags '-X main.version=$(MULTI_GITTER_VERSION)' -o $@ github.com/lindell/multi-gitter)

.PHONY: bench-plan
bench-plan: $(BIN)/cue ## Plan 1,000 campaigns x 50 repositories against recorded state; compare with cue export; then the reconciler's plan after a one-file change against a run of each on the embedded server
	$(GO) run ./bench/plan -cue $(BIN)/cue

.PHONY: bench-reconcile
bench-reconcile: ## Commit to workflow started, via fsnotify and via webhook, 50 commits each; floor: git fetch of the same change
	$(GO) run ./bench/reconcile -commits 50

.PHONY: bench-sandbox
bench-sandbox: images ## Docker sandbox provision-to-agent-ready, p50 and p95 of 50, against docker run --rm IMAGE true of the same image
	$(GO) run ./bench/sandbox -n 50 -docker $$(command -v /usr/bin/docker || command -v docker)

.PHONY: bench-scale
bench-scale: build ## A deterministic campaign over 10,000 local repositories on the embedded default (server and worker processes, local forge), against one over 1,000 in the same run: wall, peak memory, status and plan times, longest history, largest payload; SCALE_FLAGS="-repos 2000 -baseline 200"
	$(GO) run ./bench/scale -bin $(BIN) $(SCALE_FLAGS)

.PHONY: bench-pace
bench-pace: ## 2,000 pull requests from 2 processes and 3 campaigns through the shared forge write budget, against a recording forge enforcing 80 writes a minute (time scaled 6x): achieved rate vs the floor, limit responses; baseline: per-process budgets; PACE_FLAGS="-prs 500 -per-hour 500"
	$(GO) run ./bench/pace $(PACE_FLAGS)

.PHONY: bench-spec
bench-spec: $(BIN)/cue ## Load 2,000 generated campaigns; compare with cue export of the same files
	$(GO) run ./bench/spec -cue $(BIN)/cue

.PHONY: bench-kube
bench-kube: bin/envtest ## SandboxRequest create -> Job created and -> status written, p50 over 100 requests on envtest, against a plain client-go Job create
	$(GO) run ./bench/kube -n 100

.PHONY: bench-kube-node
bench-kube-node: bin/envtest bin/node images ## SandboxRequest create -> status Running (the sandbox pod runs) on a real node, p50 over 20, against a plain Job create -> its pod's containers running (as root, with containerd)
	$(GO) run ./bench/kube -node -n 20

.PHONY: bench-kube-warm-pool
bench-kube-warm-pool: bin/envtest bin/node images ## The agent-sandbox backend on a real node: SandboxRequest -> Running through a claim on a warm pool kept by agent-sandbox's controller (built into bin/node by tools/agentsandbox), p50 and p95 over 20, against the Jobs backend in the same run and agent-sandbox's published p50 (as root, with containerd)
	tools/agentsandbox/build.sh
	$(GO) run ./bench/kube -node -warm-pool -n 20

.PHONY: images
images: ## Build fleetlift/{sandbox,agent,fleetlift}, tagged with git describe and :dev, offline (needs a Docker engine; a few seconds when up to date)
	images/build.sh $(VERSION) $(IMAGES)

.PHONY: bin/envtest
bin/envtest: ## Build kube-apiserver and etcd for the Kubernetes suites into bin/envtest (~6-10 min cold; a no-op when up to date)
	tools/envtest/build.sh

.PHONY: bin/node
bin/node: ## Build kubelet, kube-controller-manager and kube-scheduler (from the k8s.io/kubernetes bin/envtest is built from), and containerd 2 and runc (tools/runtime; runc needs gcc and libseccomp-dev), for the real-node tests into bin/node (a no-op when up to date)
	tools/envtest/node.sh
	tools/runtime/build.sh

.PHONY: bin/gitea
bin/gitea: ## Build the pinned Gitea the end-to-end tests run (~6.5 min cold; a no-op when up to date)
	internal/forge/giteatest/gitea/build.sh
