# irqpilot — see README.md and CONTRIBUTING.md. `make run` builds and diagnoses this machine and
# installs nothing; `make test` and `make bench-workloads` install the
# packages their tests and workloads need.
GO      ?= go
BIN     := bin/irqpilot
PKGS    := ./...

.PHONY: all build run test test-guests lab test-lab fleet-lab deps tools lint bench bench-workloads bench-evidence bench-evidence-workloads bench-predictions fuzz fuzz-smoke man install-man clean generate measure-cost deb

all: build

# Debian packages the tests and workloads need (idempotent; needs root).
# `make run` needs none: doctor reads /proc and /sys and asks the NIC driver
# through ioctls itself. The servers and load generators (memcached, nginx,
# wrk, fio, stress-ng…) are for tests and benchmarks only, never installed on
# a machine that is only being diagnosed. lintian checks `make deb`'s package;
# ansible (with python3-apt for its apt module) runs deploy/ansible in tests.
DEB_PKGS := memcached libmemcached-tools nginx-light wrk fio sysstat irqbalance tmux iproute2 ethtool stress-ng systemd procps strace bpftool prometheus curl \
	lintian ansible python3-apt qemu-system-x86 busybox-static mmdebstrap e2fsprogs openssh-client \
	mariadb-server sysbench sockperf
deps:
	@./scripts/install-deps.sh $(DEB_PKGS)

# Static (no cgo), as the .deb's: `irqpilot lab` puts this very binary into
# its guests, which have no C library.
# The version every build path stamps (make, the .deb, the lab's guests,
# which run this very binary): `git describe`, as --version prints it.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo devel)
build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/irqpilot

# Regenerates the eBPF collector's Go bindings and object file
# (internal/kernel/bpfcost/cost_bpfel.{go,o}, committed) from its C source
# with bpf2go. Only this needs clang; `go build` uses the committed files.
GEN_PKGS := clang llvm libbpf-dev
generate:
	@./scripts/install-deps.sh $(GEN_PKGS)
	$(GO) generate ./internal/kernel/bpfcost/

# Interrupt-cost measurements behind docs/interrupt-cost.md (root, about 2 minutes):
# agreement with bpftrace, /proc/stat's tick share vs measured, overhead.
measure-cost: deps build
	@./scripts/install-deps.sh bpftrace
	./scripts/measure-cost.sh $(BIN) 10 5

# doctor exits 1 when it has warnings: that is a diagnosis, not a failure of `make run`.
run: build
	./$(BIN) doctor --duration 5s || [ $$? -eq 1 ]

# Manual pages: section 8 generated from the commands and their flags, and
# irqpilot-plan(5) rendered from docs/plan-format.md.
MAN_OUT ?= bin/man
MANDIR  ?= /usr/local/share/man/man8
MAN5DIR ?= $(dir $(MANDIR))man5
man: build
	./$(BIN) man $(MAN_OUT)

# persist's unit refers to irqpilot(8) only once it is installed here.
install-man: man
	install -d $(MANDIR) $(MAN5DIR)
	install -m 0644 $(MAN_OUT)/*.8 $(MANDIR)/
	install -m 0644 $(MAN_OUT)/*.5 $(MAN5DIR)/

# The Debian package: dist/irqpilot_<version>_<arch>.deb (docs/install.md).
# The version comes from `git describe` (scripts/build-deb.sh says how);
# DIST=DIR builds elsewhere. Needs dpkg-deb only; lintian checks it.
DIST ?= dist
deb:
	GO=$(GO) ./scripts/build-deb.sh $(DIST)

tools:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest

lint: tools
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$$($(GO) env GOPATH)/bin/staticcheck $(PKGS)

# Snapshots and generated hosts unpack thousands of small files: tmpfs is
# 30-40x faster than this disk for that.
export TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo /tmp)

# -count=1: live tests always run (never a cached result of another day's
# machine). -p 1: one package at a time. Live tests measure per-CPU load (mpstat
# agreement, the core-0 bottleneck) and start real daemons; on 2 CPUs a
# second package's tests running alongside would be in their measurements.
test: deps lint
	$(GO) test -race -p 1 -count=1 -timeout 30m $(PKGS)
	@# Address-space limits mean nothing under -race (its shadow memory is
	@# address space): the tests that set one run again without it.
	$(GO) test -count=1 -run 'UnderAddressSpaceLimit' ./internal/plan/ ./internal/kernel/
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory test-guests

# The guests with systemd, in a go test of their own (longer than the
# package timeout above allows; without their variables, and without root,
# a plain `go test ./...` skips them): the systemd guest on the small shape,
# its Debian root built once and cached (docs/lab.md), then the fleet's
# core with two guests (FLEET_LAB=core: the Ansible rollout, idempotence,
# drift and --check, repair, the rolling upgrade, a reboot and an agent
# killed; 12 minutes quiet here, see CONTRIBUTING.md). TEST_FLEET=0 leaves
# the fleet out. Prometheus, the load windows, the NIC re-plug, the
# cluster chart and four guests are make fleet-lab's.
TEST_FLEET ?= 1
GUEST_TESTS := TestLabSystemd$(if $(filter 1,$(TEST_FLEET)),|TestFleetAnsible)
test-guests:
	LAB_SYSTEMD=1 LAB_SHAPES=small FLEET_LAB=core FLEET_N=2 $(GO) test -count=1 -timeout 90m -v -run '^($(GUEST_TESTS))$$' ./internal/lab/

# The lab: irqpilot on virtual server-shaped machines (QEMU, Debian's
# kernel; root). `make lab` lists the shapes and boots the server shape
# once with irqpilot's inventory; `irqpilot lab --help` says more.
# `make test` boots the small shape six times and the nics shape once (about four minutes), then
# the systemd guest (test-guests above); test-lab boots every shape in LAB_SHAPES on every kernel of
# LAB_KERNELS and adds the systemd guest (a Debian root from mmdebstrap, booted twice).
LAB_SHAPES ?= small server big
# LAB_KERNELS: the Debian kernels every lab test runs on, each shape on
# each (5.10, 6.1, 6.12; the small shape's tests take about 9 minutes on
# 5.10 and 3 on the others here). make test runs 6.1 alone.
LAB_KERNELS ?= 5.10 6.1 6.12
lab: deps build
	./$(BIN) lab --list
	./$(BIN) lab --shape server -- irqpilot inventory

test-lab: deps
	LAB_SYSTEMD=1 LAB_SHAPES="$(LAB_SHAPES)" LAB_KERNELS="$(LAB_KERNELS)" $(GO) test -count=1 -timeout 180m -v -run '^TestLab' ./internal/lab/

# A fleet of FLEET_N systemd guests (4 vCPUs, 2 nodes each) on a bridge in
# a namespace of their own, rolled out by deploy/ansible over SSH, scraped by
# Prometheus under memcached load, then faults and the cluster chart: see
# docs/fleet.md (what is checked, how long it takes). Root. FLEET_WINDOW and
# FLEET_EVIDENCE pass through.
FLEET_N ?= 2
fleet-lab: deps
	FLEET_LAB=1 FLEET_N=$(FLEET_N) $(GO) test -count=1 -timeout 90m -v -run '^TestFleet' ./internal/lab/

bench: build
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The A/B runs behind docs/benchmarks.md (about 8 minutes, root).
BENCH_OUT ?= bench-results
bench-workloads: deps build
	mkdir -p $(BENCH_OUT)
	for w in memcached nginx; do \
	  ./$(BIN) bench --workload $$w --queues 2 --configs default,irqbalance,dedicated-core,per-queue,colocate,rps-spread,auto \
	    --rounds 3 --duration 5s -o $(BENCH_OUT)/$$w.json --chart $(BENCH_OUT)/$$w.png || exit 1; \
	done
	./$(BIN) bench --workload storage --configs default,irqbalance,dedicated-core,per-queue,colocate,rps-spread,auto,spec:app=0,spec:app=1 \
	    --rounds 3 --duration 5s -o $(BENCH_OUT)/storage.json --chart $(BENCH_OUT)/storage.png
	./$(BIN) bench --workload udp --queues 1 --client-cpus 0 --app-cpus 1 --configs default,rps-spread,auto,spec:app=0,rps=1 \
	    --rounds 3 --duration 5s -o $(BENCH_OUT)/udp-single-queue.json --chart $(BENCH_OUT)/udp-single-queue.png

# auto from evidence vs every policy, the exhaustive best and tune, with an
# A/A pair per scenario, plus the NAPI knobs (root, a quiet machine; about
# 80 minutes, 65 without the NAPI benches): docs/benchmarks.md.
bench-evidence: deps build
	OUT=$(BENCH_OUT) ./scripts/bench-evidence.sh

# The workloads campaign: MariaDB point selects (exhaustive best, tune and
# auto in one bench; the curve against concurrency with default, irqbalance,
# dedicated-core, rps-spread and auto) and sockperf under load (p99, CPU per
# message: default against the best latency configuration), every
# scenario's A/A width in aa-widths.txt (root, a quiet machine; about 60
# minutes). SMOKE=1: a few minutes that prove it runs, no evidence; LOCK=FILE:
# each measuring command waits for that lock (a shared machine).
bench-evidence-workloads: deps build
	OUT=$(BENCH_OUT) SMOKE=$(SMOKE) LOCK=$(LOCK) SCENARIOS="mysql mysql-sweep sockperf sockperf-pp" ./scripts/bench-evidence.sh

# How often the cost model is right (root; about 15 minutes with one round;
# sockperf and sysbench take a second or two to reach their rate, hence the
# 3 s warm-up before the first window):
# every workload × every policy, each plan predicted from a measurement,
# applied, measured again and judged as `apply --verify` judges it, then
# reverted. The load generator is pinned to CPU 0 (the sender outside the
# machine, as in the single-queue write-up), which keeps the packet rate
# steady enough to judge. The table goes into docs/benchmarks.md between
# its markers. PREDICTION_WORKLOADS, PREDICTION_WINDOW and
# PREDICTION_ROUNDS choose what runs.
PREDICTION_WORKLOADS ?= udp memcached nginx mysql sockperf storage
PREDICTION_WINDOW ?= 4s
PREDICTION_ROUNDS ?= 1
bench-predictions: deps build
	mkdir -p $(BENCH_OUT)/predictions
	@set -e; files=; for w in $(PREDICTION_WORKLOADS); do \
	  case $$w in storage) args= ;; *) args="--queues 2 --client-cpus 0" ;; esac; \
	  ./$(BIN) bench --predictions --workload $$w $$args --duration $(PREDICTION_WINDOW) --rounds $(PREDICTION_ROUNDS) \
	    --prime 3s --warmup 3s -o $(BENCH_OUT)/predictions/$$w.json; \
	  files="$$files$${files:+,}$(BENCH_OUT)/predictions/$$w.json"; \
	done; \
	./$(BIN) bench --predictions --from "$$files" --markdown docs/benchmarks.md

# Every fuzz target in the repository, as dir:FuzzName, found by grep so that
# a new one is never left out. Patterns are anchored: "-fuzz FuzzParse" alone
# matches FuzzParse and FuzzParseMask, and go test refuses to fuzz two.
FUZZTIME ?= 60s
FUZZ_TARGETS = $(shell grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' cmd internal | sed -E 's|^(.*)/[^/]*:func (Fuzz.*)$$|./\1:\2|' | sort)

fuzz:
	@test -n "$(FUZZ_TARGETS)" || { echo "no fuzz targets found"; exit 1; }
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn ($$pkg, $(FUZZTIME))"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# A short run of each fuzz target: seeds and a little mutation, so that a
# target that no longer builds, or that crashes at once, fails the build.
# Counted in executions, not seconds: a duration ends on a deadline, and
# Go's fuzzing coordinator before 1.27 can report that deadline as a
# failure ("context deadline exceeded", no failing input written;
# https://go.dev/issue/75804): seen here once, on FuzzParseNetDev under a
# 3 s budget.
FUZZSMOKE ?= 20000x
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZSMOKE)

clean:
	rm -rf bin dist
