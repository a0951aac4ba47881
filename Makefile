# gpushare: the two set-up commands for a fresh Debian bookworm machine (as root) are
#   make demo   install dependencies, build, run the main job on a built-in default
#   make test   install dependencies, build (normal and ASan+UBSan), run every test and
#               every fuzz target for FUZZ_SMOKE_SECONDS (20) each
.PHONY: all deps configure build build-asan demo test test-fast fuzz bench format lint clean e2e-build e2e-smoke e2e e2e-scale-up e2e-scale e2e-hami images

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SMOKE_SECONDS ?= 20
FUZZ_SECONDS ?= 600
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja

all: build

deps:
	./scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DGPUSHARE_SANITIZE=ON -DGPUSHARE_BUILD_BENCH=OFF

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD)

# Every test, in the normal build and in the sanitizer build.
test: build build-asan
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)
	FUZZ_BUILD=$(FUZZ_BUILD) ./scripts/fuzz.sh $(FUZZ_SMOKE_SECONDS)

# Every fuzz target for FUZZ_SECONDS each (docs/reliability.md, "Fuzzing").
fuzz: deps
	FUZZ_BUILD=$(FUZZ_BUILD) ./scripts/fuzz.sh $(FUZZ_SECONDS)

# The normal build's tests only (for iterating).
test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Upstream Kubernetes and etcd for the end-to-end tests (docs/e2e.md); skipped when current.
e2e-build: deps
	./scripts/e2e-build.sh

# The e2e cluster's smoke test: up, 3 Ready nodes, a plain pod Running on each, down (as root).
e2e-smoke: e2e-build
	./scripts/e2e-smoke.sh

# gpushare on the e2e cluster (docs/e2e.md): gpushare-node per node and gpushare-scheduler as
# host processes on simulated GPUs, checked against the real kubelets and kube-scheduler (as root).
# Then gpushare installed with its Helm chart from the images of `make images` (scripts/e2e-helm.sh),
# and the scale harness's smoke test: 200 fake nodes, 600 shares (scripts/e2e-scale-smoke.sh),
# and one fault during a replay on them (scripts/e2e-scale-faults.sh; E2E_SCALE=0 skips both).
e2e: e2e-build configure images
	cmake --build $(BUILD) -j $(JOBS) --target gpushare gpushare-node gpushare-scheduler gpushare-cuda fakecuda cuda-probe-dlopen
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-test.sh
	if [ "$${E2E_SCALE:-1}" = 1 ]; then GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-smoke.sh; fi
	if [ "$${E2E_SCALE:-1}" = 1 ]; then FAULT_NODES=200 FAULTS=gpushare-scheduler FAULT_GAP=1.0 GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-faults.sh; fi

# The scale harness (docs/e2e.md, "Scale"): 1,213 fake GPU nodes of Alibaba's trace on the e2e
# control plane, left up (scripts/e2e-scale.sh down stops it). As root.
e2e-scale-up: e2e-build
	cmake --build $(BUILD) -j $(JOBS) --target gpushare-node gpushare-scheduler
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale.sh up

# The product at the trace's size and beyond (about 2 hours on 2 cores; docs/e2e.md): 1,213
# fake nodes, three traces x two policies replayed through kube-scheduler and
# gpushare-scheduler beside gpushare simulate (scripts/e2e-scale-replay.sh); bursts of shares,
# fractions and whole GPUs at 1,213 and 5,000 nodes (scripts/e2e-scale-throughput.sh); the
# default trace replayed through three faults (scripts/e2e-scale-faults.sh). As root.
e2e-scale: e2e-build
	cmake --build $(BUILD) -j $(JOBS) --target gpushare gpushare-node gpushare-scheduler
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-replay.sh
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-throughput.sh
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-faults.sh

# gpushare-scheduler beside HAMi's scheduler on the scale harness, same run (docs/e2e.md, "HAMi
# side by side"): HAMi built from its public source (HAMI_GIT, a git repository holding
# HAMI_COMMIT; its Go modules from the proxy), bursts of 100 and 1,000 3 GiB pods through each and
# through kube-scheduler alone, 10 rounds (about an hour on 2 cores). As root.
e2e-hami: e2e-build
	cmake --build $(BUILD) -j $(JOBS) --target gpushare-node gpushare-scheduler
	GPUSHARE_BIN=$(CURDIR)/$(BUILD)/bin ./scripts/e2e-scale-hami.sh

bench: build
	./scripts/run-benchmarks.sh $(BUILD)

# Format every C/C++ source with clang-format-14 (.clang-format); `make lint` checks it.
format:
	git ls-files '*.h' '*.cc' '*.c' | grep -v -e '/generated/' -e '^proto/' -e '^e2e/' | xargs clang-format-14 -i

# Formatting and the clang -Wthread-safety build of the product (scripts/lint.sh; in CI).
lint: deps
	./scripts/lint.sh build-lint

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-lint

# The container images (docs/images.md): buildah, FROM Debian base images made here (as root).
images: deps
	./scripts/build-images.sh
