# inferd: one-command entry points. Every target installs what it needs first.
#   make run    build, generate the example models, serve them on :8000 (metrics :8002)
#   make test   a short fuzz run, the tests under ASan+UBSan, then unit + integration tests of the release build
#   make check  only the ASan+UBSan debug build and its tests
#   make fuzz   only the libFuzzer run of every request codec (FUZZ_SECONDS each)
#   make bench  the benchmark suite (~10 min on 2 cores): bench/results/<date>-<host>.{json,md,png}
#   make format clang-format all sources
SHELL := /bin/bash
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20
PY := /usr/bin/python3
EXAMPLES := examples/repository

.PHONY: all deps build examples run test unit check fuzz bench format clean

all: build

deps:
	@scripts/setup.sh

build: deps
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j $(JOBS)

$(EXAMPLES)/.stamp: scripts/make_examples.py
	rm -rf $(EXAMPLES)
	$(PY) scripts/make_examples.py $(EXAMPLES)
	touch $@

examples: deps $(EXAMPLES)/.stamp

run: build examples
	./build/src/inferd serve --model-repository $(EXAMPLES)

unit: build
	ctest --test-dir build --output-on-failure

# Unit+integration tests of the release build run last, so the run ends with ctest's summary.
test: fuzz check unit

check: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DINFERD_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure

fuzz: deps
	CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERD_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)
	@for t in build-fuzz/fuzz/fuzz_*; do \
	  name=$$(basename $$t); mkdir -p build-fuzz/corpus/$$name; \
	  echo "fuzz: $$name for $(FUZZ_SECONDS)s"; \
	  if ! $$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 \
	      build-fuzz/corpus/$$name fuzz/corpus/$$name > build-fuzz/$$name.log 2>&1; then \
	    tail -60 build-fuzz/$$name.log; echo "fuzz: $$name FAILED"; exit 1; fi; \
	  grep -E "^stat::number_of_executed_units" build-fuzz/$$name.log; \
	done

bench: build
	@scripts/setup.sh --bench
	$(PY) bench/run_bench.py --inferd build/src/inferd

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-fuzz $(EXAMPLES)
