#!/usr/bin/env bash
# Installs everything inferd needs to build, test and run, from Debian
# bookworm packages only (no pip, no downloads). Idempotent: does nothing when
# every package is already installed.
#   scripts/setup.sh          build, test and run
#   scripts/setup.sh --test   also what only the tests need: Debian's chromium and playwright-core (the web
#                             console's browser tests; `make test`, `make unit`, `make check` ask for it)
#   scripts/setup.sh --bench  also the benchmark baselines (FastAPI, nginx, matplotlib, wrk, h2load)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  ccache                                  # make: one compiler cache per build type (Makefile CCACHE_ROOT)
  libtorch-dev libopenblas-dev            # libtorch + a real BLAS (without it: reference BLAS, ~10x slower matmul)
  libboost-dev libboost-system-dev        # Boost.Beast / Asio (HTTP)
  libssl-dev openssl                      # tokens' SHA-256 (auth/); TLS (the openssl CLI makes the tests' certificates)
  libprotobuf-dev protobuf-compiler       # config.pbtxt (protobuf text format), gRPC messages
  libgrpc++-dev protobuf-compiler-grpc    # the KServe v2 gRPC front end (grpc_cpp_plugin, grpc_python_plugin)
  libnghttp2-dev                          # `inferd bench --protocol grpc`: gRPC calls over libnghttp2 (h2load's HTTP/2)
  rapidjson-dev zlib1g-dev libspdlog-dev libcli11-dev
  libjemalloc-dev                         # the server's allocator (faster small allocations, returns memory)
  libsqlite3-dev                          # batch jobs: SQLite sources and sinks (jobs/sqlite/)
  libpq-dev postgresql-15                 # batch jobs: PostgreSQL (jobs/postgres/); the tests start their own server
  libhiredis-dev redis-server             # online feature lookup from Redis (features/redis/); the tests start their own
  etcd-server etcd-client                 # cluster mode's registry (cluster/etcd/); the tests start their own etcd
  libsentencepiece-dev python3-sentencepiece python3-regex  # generative models: tokenizer.model (llm/sentencepiece/); the tokenizer tests
  libgtest-dev libgmock-dev libbenchmark-dev
  libxgboost-dev python3-xgboost          # the XGBoost / FIL backends; fixtures trained by python's xgboost
  libonnx-dev libonnx-testdata python3-onnx  # the ONNX backend: parser, checker, shape inference; conformance data
  libdnnl-dev                             # the ONNX executor's matrix products on oneDNN directly (libtorch's own oneDNN)
  python3-torch python3-sklearn python3-numpy   # example models, fixtures, reference outputs (/usr/bin/python3)
  python3-grpcio python3-protobuf         # the gRPC integration tests' client (stubs made by protoc at test time)
  curl
  nodejs                                  # the OpenAI SDK and LangChain as test clients (tests/integration/openai_sdk)
)
MODE="${1:-}"
if [ "$MODE" = "--test" ]; then
  PACKAGES+=(chromium)                    # the web console's browser tests (headless, driven by playwright-core)
  PACKAGES+=(python3-jsonschema)          # structured outputs: every answer validated against its schema
fi
if [ "$MODE" = "--bench" ]; then
  PACKAGES+=(python3-fastapi python3-uvicorn python3-matplotlib nginx-light nodejs wrk nghttp2-client)  # wrk, h2load: C load generators
  PACKAGES+=(python3-jsonschema)          # the structured-output bench validates every answer
fi
# Debian packages npm apart from nodejs (a nodejs from elsewhere may bring its own npm and conflict with it).
ensure_npm() {
  if ! command -v npm > /dev/null; then
    $([ "$(id -u)" -eq 0 ] || echo sudo) apt-get install -y -q --no-install-recommends npm
  fi
}
# The ONNX Runtime baseline of `make bench-onnx`: the npm package bundles libonnxruntime (no install scripts run).
ort_baseline() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/bench/baselines"
  [ -d "$dir/node_modules/onnxruntime-node" ] && return 0
  ensure_npm
  echo "setup: npm install onnxruntime-node (bench baseline)"
  npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --no-save onnxruntime-node@1.16.3
}

# llama.cpp, the generative bench's baseline: node-llama-cpp bundles prebuilt llama.cpp libraries for this CPU
# (bench/baselines/llama_cpp/package.json; no install scripts run, so nothing is built or downloaded later).
llama_cpp_baseline() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/bench/baselines/llama_cpp"
  [ -d "$dir/node_modules/node-llama-cpp" ] && return 0
  ensure_npm
  echo "setup: npm install node-llama-cpp (bench baseline)"
  npm install --prefix "$dir" --ignore-scripts --omit=optional --no-audit --no-fund --no-save
}

# The official OpenAI Node SDK and LangChain's ChatOpenAI, the generative suite's compatibility clients
# (tests/integration/openai_sdk/package.json; no install scripts run).
openai_sdk() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/openai_sdk"
  [ -d "$dir/node_modules/openai" ] && [ -d "$dir/node_modules/@langchain/openai" ] && return 0
  ensure_npm
  echo "setup: npm install openai @langchain/openai (test clients)"
  npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --no-save
}

# Playwright's library without its browsers (playwright-core: no download), driving Debian's chromium in the web
# console's tests (tests/integration/console/package.json; no install scripts run).
console_test_driver() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/console"
  [ -d "$dir/node_modules/playwright-core" ] && return 0
  ensure_npm
  echo "setup: npm install playwright-core (console tests)"
  npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --no-save
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  openai_sdk
  if [ "$MODE" = "--test" ]; then console_test_driver; fi
  if [ "$MODE" = "--bench" ]; then ort_baseline; llama_cpp_baseline; fi
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
openai_sdk
if [ "$MODE" = "--test" ]; then console_test_driver; fi
if [ "$MODE" = "--bench" ]; then ort_baseline; llama_cpp_baseline; fi
