# Thin wrapper over CMake: deps, build, run, test.
#   make run    install packages if missing, build, run the main job
#   make test   build (normal + ASan/UBSan) and run the whole test suite
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
TOPOLOGY ?= topologies/p100x16.json

.PHONY: all deps build run test test-fast test-asan bench clean

all: build

deps:
	@bash scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/simsearch --topology $(TOPOLOGY) --out $(BUILD)/plan.json

test-fast: build
	cd $(BUILD) && ctest --no-tests=error --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSS_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --no-tests=error --output-on-failure -j $(JOBS)

test: test-fast test-asan

bench: build
	bash benchmarks/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
