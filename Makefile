# Thin wrapper over CMake: deps, build, run, test.
#   make run    install packages if missing, build, run the main job
#   make test   build (normal + ASan/UBSan + fuzz) and run the whole test suite
#   make fuzz   run each libFuzzer harness for FUZZ_TIME seconds (default 120)
#   make install PREFIX=/usr/local   build, then install the binary, libsimsearch.a and .so,
#               the headers, simsearch.pc, topologies, man pages and bash completion
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME ?= 120
FUZZ_CC ?= $(shell command -v clang || command -v clang-14)
JOBS ?= $(shell nproc)
TOPOLOGY ?= topologies/p100x16.json
PREFIX ?= /usr/local

.PHONY: all deps build install run test test-fast test-asan fuzz-build test-fuzz fuzz bench clean

all: build

deps:
	@bash scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# (an existing build tree is built as configured, not reconfigured;
# INSTALL_ONLY=1 installs what is built, building nothing: the ctest)
install:
ifndef INSTALL_ONLY
	@[ -f $(BUILD)/CMakeCache.txt ] || $(MAKE) build
	@cmake --build $(BUILD) -j $(JOBS)
endif
	cmake --install $(BUILD) --prefix "$(PREFIX)"

run: build
	./$(BUILD)/simsearch --topology $(TOPOLOGY) --out $(BUILD)/plan.json

test-fast: build
	cd $(BUILD) && ctest --no-tests=error --output-on-failure -j $(JOBS)

# The sanitizer build runs the whole suite without the CUDA kernels
# (SS_NO_CUDA): the .cu files are not instrumented anyway, the CUDA runtime
# runs under ASan only with ASAN_OPTIONS=protect_shadow_gap=0 (not set here),
# and without a GPU the CUDA tests skip either way; the normal build compiles
# and (on a GPU) runs them. Linked, the CUDA libraries cost each sanitized
# process ~0.4 s CPU to load, and the shell tests start hundreds.
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSS_SANITIZE=ON -DSS_NO_CUDA=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
		ctest --no-tests=error --output-on-failure -j $(JOBS)

# The fuzz harnesses (tests/fuzz) need clang with libFuzzer: without clang
# this says SKIP; with clang but no fuzzer runtime the ctests are skipped.
fuzz-build: deps
	@if [ -z "$(FUZZ_CC)" ]; then \
		echo "SKIP fuzz: clang not found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)"; \
	else \
		CC=$(FUZZ_CC) cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSS_FUZZ=ON \
			-DSS_NO_CUDA=ON >/dev/null && \
		cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers; \
	fi

test-fuzz: fuzz-build
	@if [ -n "$(FUZZ_CC)" ]; then \
		cd $(FUZZ_BUILD) && ctest --no-tests=error --output-on-failure -L fuzz -j $(JOBS); \
	fi

fuzz: fuzz-build
	@if [ -n "$(FUZZ_CC)" ]; then \
		for h in topology model plan; do \
			[ -x $(FUZZ_BUILD)/fuzz_$$h ] || { echo "SKIP fuzz: no libFuzzer runtime"; exit 0; }; \
			bash tests/fuzz/run.sh $$h $(FUZZ_BUILD)/fuzz_$$h $(FUZZ_BUILD)/fuzz \
				-max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=10 || exit 1; \
		done; \
	fi

test: test-fast test-asan test-fuzz

bench: build
	bash benchmarks/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
