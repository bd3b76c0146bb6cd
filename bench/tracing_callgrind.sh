#!/bin/bash
# User-space instructions per tiny_mlp request, tracing off or on every request, counted by callgrind (repeatable,
# unlike time on a shared VM; kernel time is not counted). docs/benchmarks.md ("Tracing") has the numbers.
#
#   bench/tracing_callgrind.sh build/src/inferd off|all REPO [OUT]
#
# REPO: a model repository holding tiny_mlp (scripts/make_examples.py makes one; copy tiny_mlp alone into a
# folder: the other examples load slowly under valgrind). The collector for `all` is a throwaway HTTP server on a
# free port answering 200. The server runs under valgrind with instrumentation off; it is switched on for 10 s of
# c8 load after 5 s of warm-up; requests are counted from the server's own metrics.
set -euo pipefail
BIN=$1; CFG=$2; REPO=$3; OUT=${4:-$(mktemp -d)}
mkdir -p "$OUT"
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(port); GRPC=$(port); METRICS=$(port); SINK=$(port)
FLAGS=()
SINK_PID=
if [ "$CFG" = all ]; then
  /usr/bin/python3 - "$SINK" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
  SINK_PID=$!
  FLAGS=(--trace-config mode=opentelemetry --trace-config rate=1
         --trace-config "opentelemetry,url=http://127.0.0.1:$SINK/v1/traces")
fi
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/callgrind.$CFG" "$BIN" serve \
  --model-repository "$REPO" --http-port "$HTTP" --metrics-port "$METRICS" --grpc-port "$GRPC" --host 127.0.0.1 \
  --log-level warn "${FLAGS[@]}" > "$OUT/server.$CFG.log" 2>&1 &
SERVER=$!
cleanup() { kill -INT "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$HTTP/v2/health/ready" >/dev/null && break; sleep 0.5; done
load() { "$BIN" bench -m tiny_mlp --url "http://127.0.0.1:$HTTP" --warmup-s 0 --window-s 1 --duration-s "$1" \
  --concurrency 8 > /dev/null 2>&1; }
served() { curl -s "http://127.0.0.1:$METRICS/metrics" | awk '/^nv_inference_request_success\{model="tiny_mlp"/ {s+=$2} END {print s+0}'; }
load 5
before=$(served)
callgrind_control -i on "$SERVER" > /dev/null
load 10
callgrind_control -i off "$SERVER" > /dev/null
after=$(served)
cleanup
trap - EXIT
ir=$(grep -h "^totals:" "$OUT"/callgrind."$CFG"* | awk '{s+=$2} END {print s}')
n=$((after - before))
echo "$CFG: $n requests, $ir instructions, $((ir / n)) per request (callgrind_annotate $OUT/callgrind.$CFG*)"
