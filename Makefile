# inferd: one-command entry points. Every target installs what it needs first.
#   make run    build, generate the example models, serve them on :8000 (metrics :8002)
#   make test   every stage CI runs, timed (a table of stage times at the end): the clang build (thread-safety
#               analysis + fuzz targets) and a short fuzz run, every test under ASan+UBSan, the unit and
#               concurrent suites under ThreadSanitizer
#   make unit   the release build's unit and integration tests
#   make check  only the ASan+UBSan debug build and its tests
#   make thread-safety  only the clang build (-Wthread-safety -Werror: compile-time lock checking; it also builds
#               the fuzz targets)
#   make tsan   only the ThreadSanitizer build and its tests
#   make fuzz   the clang build, then the libFuzzer run of every parser: reproducible (fixed seed and run count)
#   make fuzz-explore  a longer randomized run (FUZZ_SECONDS each) to find new inputs
#   make layering  the check that src/ folders include only the folders below them (src/layers.txt)
#   make bench  the benchmark suite (~10 min on 2 cores): bench/results/<date>-<host>.{json,md,png}
#   make bench-request-path BEFORE=<binary>  the request path A/B: tiny_mlp c1 p50 and c32 throughput (~5 min)
#   make bench-onnx  the ONNX executor against TorchScript and ONNX Runtime on the same models (~3 min)
#   make bench-tracing  what tracing costs: tiny_mlp with tracing off, at the default rate, on every request (~6 min)
#   make bench-abuse  a normal client's latency while 1,000 idle connections, slowloris, oversized and deep bodies and 500 silent gRPC streams hit the server (~1 min)
#   make bench-tls  what TLS costs: tiny_mlp over plain HTTP and over TLS, c1 p50 and c32 throughput (~5 min)
#   make bench-request-cost  one request's cost: inferd pinned to a core, wrk / h2load on the other, vs nginx + the model (~3 min)
#   make bench-cluster  3 nodes + etcd: start-up over 100,000 models, forwarding overhead, kill -9 and an etcd outage under load (~8 min)
#   make bench-overload  goodput of a compute-bound model offered 10x its capacity (~3 min)
#   make bench-pipelines  ensembles vs back-to-back calls, the Python backend vs TorchScript and FastAPI (~3 min)
#   make bench-batch  batch jobs: rows/s vs the in-process best batch, online p99 while jobs run (~3 min)
#   make bench-batching  adaptive batching vs fixed delays, sequence bucketing (~35 min)
#   make bench-batching-check  tiny_mlp's adaptive vs no batching / the best fixed delay, 20 paired rounds per rate (~33 min)
#   make bench-quant  int8 at load time vs FP32: MLP, ResNet-18, BERT-style encoder, this CPU's kernels and AVX2's (~6 min)
#   make bench-tune  inferd tune on tiny_mlp, resnet18, breast_cancer: the chosen config vs the model's own (~30 min)
#   make bench-generative  LLM serving: continuous vs static batching, prefix caching, decode vs a torch loop and vs llama.cpp, structured outputs, speculative decoding, LoRA adapters (~13 min)
#   make install  build, then install the inferd binary into $(PREFIX)/bin (default /usr/local)
#   make format clang-format all sources
SHELL := /bin/bash
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 300
# CI fuzzing is deterministic (fixed seed, fixed run count) so a landing never
# fails on a random draw; `make fuzz-explore` searches for new findings.
# 200k runs each: the 15 targets take ~2 min on 2 cores (1M took ~10, half of it
# in the two slowest targets).
FUZZ_ARGS ?= -seed=1 -runs=200000
PY := /usr/bin/python3
EXAMPLES := examples/repository

PREFIX ?= /usr/local

# ccache, when installed (scripts/setup.sh installs it), one cache per build type: builds of one type reuse each
# other's objects and never evict another type's. CCACHE_SLOPPINESS lets precompiled headers be cached.
CCACHE_ROOT ?= $(HOME)/.cache/inferd-ccache
LAUNCHER = $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
CCACHE_ENV = CCACHE_DIR=$(CCACHE_ROOT)/$(1) CCACHE_MAXSIZE=3G CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

.PHONY: all deps test-deps build install image examples examples-all run test stages unit check asan-build asan-test thread-safety clang-build tsan tsan-build tsan-test fuzz fuzz-build fuzz-explore layering bench bench-onnx bench-many-models bench-request-path bench-tracing bench-tls bench-request-cost bench-abuse bench-cluster bench-overload bench-pipelines bench-cache bench-shadow bench-batch bench-batching bench-batching-check bench-generative bench-quant bench-tune format clean

all: build

deps:
	@scripts/setup.sh
# What only the tests need on top (Debian's chromium and playwright-core for the web console's browser tests):
# `make run` does not install a browser.
test-deps: deps
	@scripts/setup.sh --test

# The release build is a unity build too (CMake joins a library's sources 8 to a file; measured 2026-11-27: its
# libraries and non-unit test binaries in 600 CPU s instead of 1,262). A missing include still fails: the clang build compiles every file alone, and the libtorch
# backends, which clang cannot compile, are never joined (src/CMakeLists.txt).
build: deps
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON $(LAUNCHER)
	$(call CCACHE_ENV,release) cmake --build build -j $(JOBS)

install: build
	cmake --install build --prefix $(PREFIX)

# An OCI image from Debian's packages (mmdebstrap + umoci; no container engine needed), for
# deploy/kubernetes/ (docs/cluster.md#kubernetes). Not part of `make test`.
image: build
	bash scripts/make_image.sh

# Every example model but the chat model (seconds); `make run` trains the chat model in the background while the
# others serve (scripts/run_examples.sh), and `make examples-all` trains it in the foreground.
$(EXAMPLES)/.stamp: scripts/make_examples.py
	rm -rf $(EXAMPLES)
	$(PY) scripts/make_examples.py $(EXAMPLES) --skip-chat
	touch $@

examples: deps $(EXAMPLES)/.stamp

examples-all: examples
	@[ -d $(EXAMPLES)/license_chat ] || $(PY) scripts/make_chat_model.py $(EXAMPLES)
	@[ -d $(EXAMPLES)/license_chat/loras/license_files ] || $(PY) scripts/make_chat_lora.py $(EXAMPLES)

run: build examples
	@scripts/run_examples.sh $(EXAMPLES) ./build/src/inferd

# Tests run $(JOBS) at a time: integration suites spend much of their time
# waiting on servers and sockets, and each one uses its own ports and folders.
# Under TSan integration.Shutdown runs alone (tests/CMakeLists.txt: one -j2
# run there hung it, not reproduced since). Test fixtures (the integration
# repository, XGBoost and LLM models) are generated once into build-fixtures/
# and copied into each build (tests/fixture_cache.py).
CTEST := ctest -j $(JOBS) --output-on-failure

unit: build test-deps
	$(CTEST) --test-dir build

# Every stage, timed (scripts/test_stages.sh prints the table at the end, also when a stage fails). Three builds:
# clang (thread-safety analysis + fuzz targets), ASan+UBSan (every test), TSan (unit tests and concurrent suites,
# optimized: -O2 -DNDEBUG, the release build's flags). The release build itself is not part of `make test`
# (`make unit` runs its tests): its code is the TSan build's, compiled alike, and our numeric code computes the
# same numbers at -O0 and -O2 (no -ffast-math, no -march: GCC neither reorders nor contracts floating-point
# operations), so the ASan stage's numeric suites judge it too. Measured in docs/development.md.
test: test-deps
	@scripts/test_stages.sh layering clang-build fuzz-run asan-build asan-test tsan-build tsan-test

# The sanitizer builds keep line tables only (-g1): enough for symbolized
# reports, and quicker to build (http_server.cc: 21% less compile time under
# TSan, 7% under ASan, than with -g). They are unity builds (CMake joins a
# library's sources 8 to a file, so shared headers are parsed once per 8;
# the unit tests stay file by file), as is the release build: the clang build
# still compiles every file on its own, so a missing include shows there.
# Under ASan each unit test binary runs as one ctest test (a process start
# costs 0.3-2 s there; tests/CMakeLists.txt, INFERD_CTEST_PER_TEST).
check: asan-test
asan-build: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DINFERD_SANITIZE=ON \
	  -DCMAKE_UNITY_BUILD=ON -DINFERD_CTEST_PER_TEST=OFF $(LAUNCHER)
	$(call CCACHE_ENV,asan) cmake --build build-asan -j $(JOBS)
asan-test: asan-build test-deps
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --test-dir build-asan

# One clang build serves the thread-safety analysis and the fuzz targets: every
# library, test and tool is compiled by clang with -Wthread-safety -Werror (the
# lock annotations TSA_GUARDED_BY, TSA_REQUIRES... are checked), and the
# parsers the fuzz targets reach are instrumented with libFuzzer + ASan +
# UBSan (fuzz/CMakeLists.txt; -O1 there). The rest compiles at -O0 without
# debug info: it is analysed and linked, not run. The TorchScript, ONNX and
# llm backends are left out: libtorch 1.13's headers do not compile with
# clang in C++20 mode (and they take no locks); the ONNX fuzz target compiles
# the executor's sources itself as C++17.
clang-build: deps
	CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g0 \
	  -DINFERD_BACKEND_PYTORCH=OFF -DINFERD_BACKEND_LLM=OFF -DINFERD_BACKEND_ONNX=OFF -DINFERD_JEMALLOC=OFF \
	  -DINFERD_FUZZ=ON -DINFERD_ANALYSIS_ONLY=ON $(LAUNCHER)
	$(call CCACHE_ENV,clang) cmake --build build-clang -j $(JOBS)
thread-safety: clang-build

# Unit tests and the concurrent integration suites under ThreadSanitizer
# (INFERD_NUMERIC_TESTS=OFF: the numeric and codec suites run under ASan and
# release only; tests/CMakeLists.txt lists both); cmake/tsan.supp lists the
# third-party code it cannot see into, each entry explained.
# suppress_equal_addresses=0: TSan's de-duplication by address scans a list
# of every racy address seen so far, once per report; with the gRPC handoffs'
# (suppressed) reports that list grew so long that a server under the
# 1000-concurrent-calls test needed over a minute to shut down. Matching the
# suppressions by stack alone keeps it fast (the gRPC suite: 25 s, was 36-95 s).
TSAN_OPTIONS_CI := suppressions=$(CURDIR)/cmake/tsan.supp halt_on_error=1 second_deadlock_stack=1 \
  suppress_equal_addresses=0
tsan: tsan-test
tsan-build: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
	  -DINFERD_TSAN=ON -DCMAKE_UNITY_BUILD=ON -DINFERD_NUMERIC_TESTS=OFF $(LAUNCHER)
	$(call CCACHE_ENV,tsan) cmake --build build-tsan -j $(JOBS)
tsan-test: tsan-build
	TSAN_OPTIONS="$(TSAN_OPTIONS_CI)" $(CTEST) --test-dir build-tsan

# CI fuzzing is deterministic (fixed seed, fixed run count) so a landing never
# fails on a random draw; `make fuzz-explore` searches for new findings.
fuzz-build: clang-build
fuzz: fuzz-run
fuzz-run: clang-build
	@$(MAKE) --no-print-directory run-fuzzers RUN_ARGS="$(FUZZ_ARGS)"

fuzz-explore: clang-build
	@$(MAKE) --no-print-directory run-fuzzers RUN_ARGS="-max_total_time=$(FUZZ_SECONDS)"

# Each target starts from the committed seeds (fuzz/corpus/<name>) plus what
# earlier runs found (build-clang/corpus/<name>); a crash prints its input.
# $(JOBS) targets run at once (each is one process on one core).
run-fuzzers:
	@ls build-clang/fuzz/fuzz_* | xargs -P $(JOBS) -I{} sh -c '\
	  t={}; name=$$(basename $$t); mkdir -p build-clang/corpus/$$name; \
	  if ! $$t $(RUN_ARGS) -max_len=65536 -print_final_stats=1 -artifact_prefix=build-clang/$$name- \
	      build-clang/corpus/$$name fuzz/corpus/$$name > build-clang/$$name.log 2>&1; then \
	    tail -60 build-clang/$$name.log; echo "fuzz: $$name FAILED"; exit 255; fi; \
	  echo "fuzz: $$name $(RUN_ARGS): $$(grep -E "^stat::number_of_executed_units" build-clang/$$name.log)"'

# The folder order of src/ (src/layers.txt): an include that points up fails.
layering:
	@$(PY) scripts/check_layering.py

bench: build
	@scripts/setup.sh --bench
	$(PY) bench/run_bench.py --inferd build/src/inferd

# Issue 34's A/B of the request path: BEFORE=<an inferd binary built from an older commit> against this build,
# tiny_mlp's c1 p50 and c32 throughput, rounds alternating (~5 min).
bench-request-path: build
	$(PY) bench/request_path_ab.py --before $(BEFORE) --after build/src/inferd

# Issue 36's tracing row: tiny_mlp with tracing off, at Triton's default rate and on every request (spans exported to
# an nginx that drops them), c1 p50 and c32 throughput, rounds alternating (~6 min).
bench-tracing: build
	@scripts/setup.sh --bench
	$(PY) bench/tracing_bench.py --inferd build/src/inferd

# Issue 37's TLS row: tiny_mlp over plain HTTP and over TLS (a certificate made here), c1 p50 and c32 throughput,
# rounds alternating (~5 min).
bench-tls: build
	@scripts/setup.sh --bench
	$(PY) bench/tls_bench.py --inferd build/src/inferd

bench-request-cost: build
	@scripts/setup.sh --bench
	$(PY) bench/request_cost_bench.py --inferd build/src/inferd

# Issue 37's abuse row: a normal client at concurrency 4, alone and while misbehaving clients run (~1 min).
bench-abuse: build
	@scripts/setup.sh --bench
	$(PY) bench/abuse_bench.py --inferd build/src/inferd

# Issue 35's cluster targets: 3 nodes + etcd on loopback: start-up over 100,000 models, forwarding overhead, 3 nodes
# vs 1, kill -9 and an etcd outage under Zipf traffic over 10,000 models (~8 min; the repositories once, ~2 min).
bench-cluster: build
	$(PY) bench/cluster_bench.py --inferd build/src/inferd

# Issue 14's pipeline targets: ensemble vs back-to-back calls, the Python backend vs TorchScript and FastAPI (~3 min).
bench-pipelines: build
	@scripts/setup.sh --bench
	$(PY) bench/pipeline_bench.py --inferd build/src/inferd

# Issue 15's cache targets: unique-input throughput with the cache on vs off, repeated-input hits (~2 min).
bench-cache: build
	$(PY) bench/cache_bench.py --inferd build/src/inferd

# Issue 15's shadow target: the client's p99 with an erroring or 10x slower shadow vs none (~1 min).
bench-shadow: build
	$(PY) bench/shadow_bench.py --inferd build/src/inferd

# Issue 16's batch targets: job rows/s vs in-process best batch (resnet18, tiny_mlp), online p99 during jobs (~3 min).
bench-batch: build
	$(PY) bench/batch_bench.py --inferd build/src/inferd

# Issue 18's targets: adaptive vs the best fixed delay (resnet18, tiny_mlp; Poisson at 3 rates), sequence
# bucketing vs equal-shape batching on variable-length text (~35 min).
bench-batching: build
	$(PY) bench/batching_bench.py --inferd build/src/inferd

# The closest calls of bench-batching measured with more rounds: tiny_mlp at 10%, 40% and 70% of its capacity,
# adaptive vs no batching vs the best fixed delay the batching bench found there (0, 0, 2000 us on a 2-core VM)
# vs a second identical model with that delay (the noise), paired per round.
bench-batching-check: build
	$(PY) bench/batching_low_rate_check.py --inferd build/src/inferd --rounds 20 --load 0.1
	$(PY) bench/batching_low_rate_check.py --inferd build/src/inferd --rounds 20 --load 0.4
	$(PY) bench/batching_low_rate_check.py --inferd build/src/inferd --rounds 20 --load 0.7 --best 2000 \
	  --without-nobatch --with-cpu-aware

bench-generative: build
	$(PY) bench/generative_bench.py --inferd build/src/inferd

# int8 at load time (quantization "int8") vs FP32 on the same ONNX files (docs/benchmarks.md).
bench-quant: build
	$(PY) bench/quant_bench.py --inferd build/src/inferd --out bench/results/$$(date +%Y-%m-%d)-quant.md

# Issue 41's tune target: `inferd tune` on three example models, each search at most 10 minutes.
bench-tune: build
	$(PY) bench/tune_bench.py --inferd build/src/inferd --out bench/results/$$(date +%Y-%m-%d)-tune.md

# Goodput under 10x overload (docs/benchmarks.md).
bench-overload: build
	$(PY) bench/overload.py --inferd build/src/inferd --out bench/results/$$(date +%Y-%m-%d)-overload.md

# ONNX executor vs TorchScript and ONNX Runtime (onnxruntime-node), in-process (docs/benchmarks.md).
bench-onnx: build
	@scripts/setup.sh --bench
	$(PY) bench/onnx_bench.py --inferd build/src/inferd

# Many models per box: 10,000 generated models, Zipf traffic under a budget, hot swaps (docs/benchmarks.md).
bench-many-models: build
	$(PY) bench/many_models.py --inferd build/src/inferd --out bench/results/$$(date +%Y-%m-%d)-many-models.md

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-clang build-tsan build-fixtures $(EXAMPLES)
