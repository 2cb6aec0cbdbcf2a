# tilepipe: `make run` and `make test` on a fresh Debian 12 machine.
SHELL := /bin/bash
GO ?= go
BIN := $(abspath bin)
RUN_DIR ?= runs/$(shell date -u +%Y%m%dT%H%M%SZ)
COHORT ?= cpu-default
ROUTES ?= halide,openblas,torch-eager
# The visit time an adaptive replay may spend in all (tilepipe run
# --budget). cpu-default and quick are timed in fixed rounds (their
# cohorts say "target": 0) and do not use it; it bounds cpu-full, the
# long run, and any adaptive cohort.
BUDGET ?= 30m
# More flags for `tilepipe run`, e.g. RUN_FLAGS="--target 1.5" for adaptive rounds.
RUN_FLAGS ?=

# System packages the routes need (Debian 12 names).
DEB_PACKAGES := xz-utils file libhalide14-0-dev libopenblas-dev python3-torch python3-numpy g++ gcc llvm-14-dev clang-14 bubblewrap docker-registry chromium slurm-wlm munge

.PHONY: all deps lint build bin-tilepipe routes route-halide route-orc route-scripts run test test-packages test-short test-quiet test-hostile test-adversarial test-oracle bench clean

all: build

# Installs what is missing; apt-get update runs once, only when needed.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# The Go binary and the C++ routes build side by side, as many at once as
# there are cores (a fresh clone: 48 s one after another, 29 s here).
JOBS ?= $(shell nproc)
build: deps
	@$(MAKE) --no-print-directory -j$(JOBS) bin-tilepipe routes

bin-tilepipe:
	$(GO) build -o $(BIN)/tilepipe ./cmd/tilepipe

routes: route-halide route-orc route-scripts
route-halide:
	$(MAKE) -C routes/halide BIN=$(BIN)/routes/halide BIN_CUDA=$(BIN)/routes/halide-cuda
route-orc:
	$(MAKE) -C routes/orc BIN=$(BIN)/routes/orc
route-scripts:
	@for r in openblas torch-eager torch-compile triton cublas kernel-c kernel-torch; do \
	  mkdir -p $(BIN)/routes/$$r && find routes/$$r -maxdepth 1 -type f -exec cp -p {} $(BIN)/routes/$$r/ \; ; \
	done

# The main job: the default cohort through all four stages, then the
# results table and the audit verdict. Exit 3 (completed, with explicit
# unsupported rows such as openblas softmax) is a finished run, not a
# make error; 1 (any failure) and 2 (usage) are.
run: build
	@mkdir -p runs
	$(BIN)/tilepipe run --cohort $(COHORT) --routes $(ROUTES) --budget $(BUDGET) --output $(RUN_DIR) $(RUN_FLAGS) || [ $$? -eq 3 ]

# Tests run through gotestsum (a tool dependency in go.mod): go test alone
# prints a package only when it ends, minutes into cmd/tilepipe; gotestsum
# prints each test as it finishes, with its time, and repeats every failure
# at the end. --raw-command keeps $(GO) the go that runs the tests.
GOTEST := $(GO) tool gotestsum --format testname --raw-command -- $(GO) test -json

# -count=1: tests run route programs and timers whose files the go test
# cache cannot see, so a cached pass could hide a changed route. -timeout
# 30m: cmd/tilepipe has taken 461 s on a slow day, close to go test's
# default of 10 minutes per package.
#
# Two phases. The packages that time nothing (the oracle, the store, the
# route builds, ...) run two at a time. Then the packages whose tests time
# visits, account their CPU or measure the machine (TIMED) run one at a
# time: with two, the routes package's torch visits and cmd/tilepipe's
# honest visits shared the 2 cores, and a honest naive visit failed the
# fresh-sample bound (docs/decisions.md, "Tests that need a quiet
# machine"). The quiet suite, the adversarial kernels and the resume
# test, needs the machine to itself and is `make test-quiet`; CI runs
# both (.ci/run), and `make test-hostile` again in a hostile environment.
MODULE := github.com/tilepipe/tilepipe
TIMED := cmd/tilepipe routes replay prepare/harness internal/visit internal/load internal/floors internal/affinity
QUIET_TESTS := ^(TestAdversaries|TestResumeFromEveryKillPoint)$$
TESTENV := TILEPIPE_ROUTES=$(BIN)/routes TILEPIPE_REQUIRE_ROUTES=1 TILEPIPE_BIN=$(BIN)/tilepipe
UNTIMED = $$($(GO) list ./... | grep -vxF $(foreach p,$(TIMED),-e $(MODULE)/$(p)))
# TEST_FLAGS: -short for test-short.
TEST_FLAGS ?=
test: build test-packages
test-packages:
	$(TESTENV) $(GOTEST) -p 2 -count=1 -timeout 30m $(TEST_FLAGS) $(UNTIMED)
	$(TESTENV) $(GOTEST) -p 1 -count=1 -timeout 30m $(TEST_FLAGS) -skip '$(QUIET_TESTS)' $(addprefix ./,$(TIMED))

# gofmt, go vet and staticcheck (the version go.mod pins as a tool), all clean.
lint: deps
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# The everyday loop: the same packages, long end-to-end tests skipped
# (testing.Short: each says what make test runs instead).
test-short: build
	@$(MAKE) --no-print-directory test-packages TEST_FLAGS=-short

# The adversarial suite (docs/threat-model.md; its extra-threads kernels
# are caught by CPU accounting, which needs the machine's cores free of
# other test packages) and the resume test (every one of its honest
# visits must pass the fresh-sample bound), alone.
test-quiet: build
	$(TESTENV) $(GOTEST) -count=1 -timeout 30m -run '$(QUIET_TESTS)' ./cmd/tilepipe

# Every test package again in an environment a user's machine may hold
# (issue 25), each value unusual but valid: an OpenBLAS core type the
# routes must keep and record, thread counts that are not the machine's,
# one P for Go, a TMPDIR whose path has a space, and a locale that is not
# installed. A test that depends on one of them must set what it needs.
HOSTILE_ENV := OPENBLAS_CORETYPE=Prescott OPENBLAS_L2_SIZE=512 OPENBLAS_NUM_THREADS=3 OMP_NUM_THREADS=3 GOMAXPROCS=1 LANG=de_DE.UTF-8 LC_ALL=de_DE.UTF-8
test-hostile: build
	@tmp=$$(mktemp -d "/tmp/tilepipe hostile.XXXXXX") && \
	  echo "make test-hostile: $(HOSTILE_ENV) TMPDIR=\"$$tmp\"" && \
	  env $(HOSTILE_ENV) TMPDIR="$$tmp" $(MAKE) --no-print-directory test-packages; \
	  rc=$$?; rm -rf "$$tmp"; exit $$rc

# The adversarial suite alone, writing its table (docs/results).
ADVERSARY_TABLE ?= runs/adversarial.md
test-adversarial: build
	@mkdir -p $(dir $(ADVERSARY_TABLE))
	TILEPIPE_ROUTES=$(BIN)/routes TILEPIPE_REQUIRE_ROUTES=1 TILEPIPE_ADVERSARY_TABLE=$(abspath $(ADVERSARY_TABLE)) \
	  $(GOTEST) -count=1 -timeout 30m -run '^TestAdversaries$$' ./cmd/tilepipe

test-oracle:
	$(GO) test ./oracle/ -run TestTightness -v -count=1

# Plain go test: it prints each benchmark as it finishes already, in the
# format benchstat reads, and gotestsum v1.13.0's summary lists every
# benchmark of Go 1.26 as a failed test. Three counts; then each speed
# target as a ratio to its anchor from this same run (benchratio), the
# raw output kept in bin/bench.txt.
bench: build
	set -o pipefail; TILEPIPE_ROUTES=$(BIN)/routes $(GO) test ./... -run '^$$' -bench . -benchmem -count 3 | tee $(BIN)/bench.txt
	$(GO) run ./internal/tools/benchratio < $(BIN)/bench.txt

clean:
	rm -rf bin
