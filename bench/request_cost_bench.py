#!/usr/bin/env python3
"""What one request costs (issue 38's rows): the example tiny_mlp served by inferd pinned to one core, driven by C
load generators pinned to the other -- wrk for HTTP (JSON and the binary extension), h2load for gRPC (unary
ModelInfer, a framed protobuf body) -- against, in the same run:

  nginx     Debian's nginx on the same core answering a static body of the same size (the HTTP floor)
  model     the model called in-process (`inferd bench --in-process`, batch 1, one thread): its time per call
  ideal     1 / (1 / nginx's rate + the model's time): a server that cost no more than nginx's answer plus the model

The report gives each protocol's throughput at c1 and c32 (wrk -c32 -t1; h2load -c4 -m8, i.e. 4 connections x 8
streams), the server's CPU per request (from /proc), the ratios to the ideal and gRPC / HTTP, and how `inferd bench`'s
own clients compare with wrk and h2load on the same server (the bench's gRPC rows against h2load's).

  /usr/bin/python3 bench/request_cost_bench.py --inferd build/src/inferd [--seconds 5] [--rounds 2]

Needs wrk and h2load (scripts/setup.sh --bench installs them) and two cores.
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import time
import urllib.request

import run_bench as rb

ROOT = rb.ROOT
X = [0.25 * ((i % 7) - 3) for i in range(16)]  # one tiny_mlp row (16 values)


def pinned(core, args):
    return ["taskset", "-c", str(core)] + args


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def grpc_body():
    """A length-prefixed inference.ModelInferRequest: tiny_mlp, input "input" FP32 [1, 16] as raw_input_contents."""
    shape = varint(1) + varint(16)
    tensor = field(1, 2, b"input") + field(2, 2, b"FP32") + field(3, 2, shape)
    raw = struct.pack("<16f", *X)
    msg = field(1, 2, b"tiny_mlp") + field(5, 2, tensor) + field(7, 2, raw)
    return b"\x00" + struct.pack(">I", len(msg)) + msg


def json_body():
    return json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": X}]}).encode()


def binary_body():
    head = json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 64}}]}).encode()
    return head + struct.pack("<16f", *X), len(head)


def wrk_script(work, name, body, headers):
    body_path = os.path.join(work, name + ".body")
    with open(body_path, "wb") as f:
        f.write(body)
    lua = os.path.join(work, name + ".lua")
    with open(lua, "w") as f:
        f.write('wrk.method = "POST"\n')
        f.write('local f = io.open("%s", "rb")\nwrk.body = f:read("*a")\nf:close()\n' % body_path)
        for k, v in headers.items():
            f.write('wrk.headers["%s"] = "%s"\n' % (k, v))
    return lua


def run_wrk(lua, port, path, conns, seconds):
    out = subprocess.run(pinned(1, ["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, "--latency", "-s", lua,
                                    "http://127.0.0.1:%d%s" % (port, path)]),
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    p50 = re.search(r"50%\s+([0-9.]+)(us|ms|s)", out)
    p50_us = float(p50.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[p50.group(2)] if p50 else float("nan")
    return {"rps": rps, "p50_us": p50_us, "errors": int(errors.group(1)) if errors else 0,
            "socket_errors": sock.group(1) if sock else ""}


def run_h2load(body_path, port, conns, streams, seconds):
    out = subprocess.run(pinned(1, ["h2load", "-D", str(seconds), "-c", str(conns), "-m", str(streams), "-t", "1",
                                    "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", body_path,
                                    "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % port]),
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    rps = float(re.search(r"finished in [0-9.]+s, ([0-9.]+) req/s", out).group(1))
    failed = int(re.search(r"requests: .* (\d+) failed", out).group(1))
    mean = re.search(r"time for request:\s+[0-9.]+(us|ms)\s+[0-9.]+(us|ms)\s+([0-9.]+)(us|ms)", out)
    mean_us = float(mean.group(3)) * (1e3 if mean.group(4) == "ms" else 1) if mean else float("nan")
    return {"rps": rps, "mean_us": mean_us, "errors": failed}


def run_inferd_bench(binary, args, seconds):
    row = os.path.join("/tmp", "inferd-request-cost-row-%d.json" % os.getpid())
    subprocess.run(pinned(1, [binary, "bench", "-m", "tiny_mlp", "--warmup-s", "1", "--duration-s", str(seconds),
                              "--output", row] + args), check=True, stdout=subprocess.DEVNULL, timeout=seconds + 120)
    with open(row) as f:
        r = json.load(f)["rows"][0]
    os.remove(row)
    return {"rps": r["requests_per_s"], "p50_us": r["p50_us"], "errors": r.get("errors", 0)}


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def successes(mport):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=30).read().decode()
    return sum(float(m) for m in re.findall(r'^nv_inference_request_success\{model="tiny_mlp"[^}]*\} ([0-9.e+]+)$',
                                            text, re.M))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    if os.cpu_count() < 2:
        raise SystemExit("needs two cores (the server on one, the load generator on the other)")
    work, repo = rb.example_repo("inferd-request-cost-")
    s = a.seconds
    jb = json_body()
    bb, hlen = binary_body()
    gb = grpc_body()
    gpath = os.path.join(work, "grpc.body")
    with open(gpath, "wb") as f:
        f.write(gb)
    lua_json = wrk_script(work, "json", jb, {"Content-Type": "application/json"})
    lua_bin = wrk_script(work, "binary", bb, {"Inference-Header-Content-Length": str(hlen),
                                              "Content-Type": "application/octet-stream"})

    # The model in-process: its time per call at batch 1 on one thread.
    row = os.path.join(work, "inproc.json")
    subprocess.run(pinned(0, [a.inferd, "bench", "--in-process", "--model-repository", repo, "-m", "tiny_mlp",
                              "--batch-sizes", "1", "--warmup-s", "1", "--duration-s", str(s), "--output", row]),
                   check=True, stdout=subprocess.DEVNULL)
    with open(row) as f:
        model_us = 1e6 / json.load(f)["rows"][0]["requests_per_s"]

    rounds = []
    for r in range(a.rounds):
        res = {}
        # nginx's static answer on core 0.
        ndir = os.path.join(work, "nginx%d" % r)
        os.makedirs(ndir)
        nport = rb.free_port()
        conf = open(os.path.join(ROOT, "bench", "baselines", "nginx.conf.in")).read()
        open(os.path.join(ndir, "nginx.conf"), "w").write(conf.replace("@PORT@", str(nport)).replace("@DIR@", ndir))
        ng = rb.Proc(pinned(0, ["/usr/sbin/nginx", "-c", os.path.join(ndir, "nginx.conf"), "-e",
                                os.path.join(ndir, "err.log")]), nport, "/", os.path.join(work, "nginx.log"))
        try:
            res["nginx c1"] = run_wrk(lua_json, nport, "/v2/models/tiny_mlp/infer", 1, s)
            res["nginx c32"] = run_wrk(lua_json, nport, "/v2/models/tiny_mlp/infer", 32, s)
        finally:
            ng.stop()
        # inferd on core 0: one HTTP thread, the model's one thread.
        port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
        srv = rb.Proc(pinned(0, [a.inferd, "serve", "--model-repository", repo, "--http-port", str(port),
                                 "--metrics-port", str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1",
                                 "--http-threads", "1", "--log-level", "warn"]),
                      port, "/v2/health/ready", os.path.join(work, "inferd.log"))
        try:
            pid = srv.p.pid
            # The metrics port opens after the HTTP port answers ready: wait for it (bounded).
            deadline = time.time() + 60
            while True:
                try:
                    successes(mport)
                    break
                except OSError:
                    if time.time() > deadline or srv.p.poll() is not None:
                        raise
                    time.sleep(0.05)
            for name, fn in (
                    ("json c1", lambda: run_wrk(lua_json, port, "/v2/models/tiny_mlp/infer", 1, s)),
                    ("json c32", lambda: run_wrk(lua_json, port, "/v2/models/tiny_mlp/infer", 32, s)),
                    ("binary c1", lambda: run_wrk(lua_bin, port, "/v2/models/tiny_mlp/infer", 1, s)),
                    ("binary c32", lambda: run_wrk(lua_bin, port, "/v2/models/tiny_mlp/infer", 32, s)),
                    ("grpc c1", lambda: run_h2load(gpath, gport, 1, 1, s)),
                    ("grpc c32", lambda: run_h2load(gpath, gport, 4, 8, s)),
                    ("bench json c1", lambda: run_inferd_bench(a.inferd, ["--url", "http://127.0.0.1:%d" % port,
                                                                          "--concurrency", "1"], s)),
                    ("bench json c32", lambda: run_inferd_bench(a.inferd, ["--url", "http://127.0.0.1:%d" % port,
                                                                           "--concurrency", "32"], s)),
                    ("bench grpc c1", lambda: run_inferd_bench(a.inferd, [
                        "--url", "http://127.0.0.1:%d" % port, "--protocol", "grpc", "--grpc-url",
                        "127.0.0.1:%d" % gport, "--concurrency", "1", "--grpc-channels", "1"], s)),
                    ("bench grpc c32", lambda: run_inferd_bench(a.inferd, [
                        "--url", "http://127.0.0.1:%d" % port, "--protocol", "grpc", "--grpc-url",
                        "127.0.0.1:%d" % gport, "--concurrency", "32", "--grpc-channels", "4"], s))):
                c0, n0 = cpu_s(pid), successes(mport)
                row = fn()
                c1, n1 = cpu_s(pid), successes(mport)
                row["server_requests"] = n1 - n0
                row["server_cpu_us"] = (c1 - c0) * 1e6 / max(1.0, n1 - n0)
                res[name] = row
                print("round %d %-15s %9.0f req/s  server %.1f us/req  errors %s" % (
                    r + 1, name, row["rps"], row["server_cpu_us"], row.get("errors")), flush=True)
        finally:
            srv.stop()
        rounds.append(res)

    def med(name, key="rps"):
        return statistics.median(x[name][key] for x in rounds)

    ideal = 1.0 / (1.0 / med("nginx c32") + model_us / 1e6)
    lines = [
        "# What one request costs (issue 38): tiny_mlp, inferd pinned to core 0, wrk / h2load on core 1",
        "",
        "%s, %d cores; `%s`; %d rounds of %d s, medians; model in-process %.1f us per call (batch 1, one thread)" % (
            rb.cpu_model(), os.cpu_count(), a.inferd, a.rounds, s, model_us),
        "",
        "| row | c1 req/s | c32 req/s | server CPU us/req (c32) | c32 / ideal |",
        "|---|---:|---:|---:|---:|",
        "| nginx static answer (core 0) | %.0f | %.0f | | |" % (med("nginx c1"), med("nginx c32")),
    ]
    for proto, label in (("json", "HTTP JSON (wrk)"), ("binary", "HTTP binary (wrk)"), ("grpc", "gRPC (h2load)")):
        lines.append("| %s | %.0f | %.0f | %.1f | **%.2f** |" % (
            label, med(proto + " c1"), med(proto + " c32"), med(proto + " c32", "server_cpu_us"),
            med(proto + " c32") / ideal))
    for proto, label in (("bench json", "`inferd bench` HTTP JSON"), ("bench grpc", "`inferd bench` gRPC")):
        lines.append("| %s | %.0f | %.0f | %.1f | %.2f |" % (
            label, med(proto + " c1"), med(proto + " c32"), med(proto + " c32", "server_cpu_us"),
            med(proto + " c32") / ideal))
    lines += [
        "",
        "Ideal (core 0): 1 / (1 / %.0f + %.1f us) = %.0f req/s." % (med("nginx c32"), model_us, ideal),
        "",
        "| ratio | value | target |",
        "|---|---:|---:|",
        "| HTTP JSON c32 / ideal | %.2f | >= 0.7 |" % (med("json c32") / ideal),
        "| HTTP binary c32 / ideal | %.2f | >= 0.7 |" % (med("binary c32") / ideal),
        "| gRPC c32 / ideal | %.2f | >= 0.7 |" % (med("grpc c32") / ideal),
        "| gRPC / HTTP JSON, c1 | %.2f | >= 0.95 |" % (med("grpc c1") / med("json c1")),
        "| gRPC / HTTP JSON, c32 | %.2f | >= 0.95 |" % (med("grpc c32") / med("json c32")),
        "| server CPU per request, gRPC / HTTP JSON (c32) | %.2f | <= 1.1 |" % (
            med("grpc c32", "server_cpu_us") / med("json c32", "server_cpu_us")),
        "| `inferd bench` gRPC / h2load, c1 | %.2f | >= 0.9 |" % (med("bench grpc c1") / med("grpc c1")),
        "| `inferd bench` gRPC / h2load, c32 | %.2f | >= 0.9 |" % (med("bench grpc c32") / med("grpc c32")),
        "| `inferd bench` HTTP / wrk, c32 | %.2f | |" % (med("bench json c32") / med("json c32")),
        "",
        "Errors: every row's load generator reported none unless listed here: %s." % (
            ", ".join("%s %s" % (k, v["errors"]) for x in rounds for k, v in x.items() if v.get("errors")) or "none"),
    ]
    rb.write_results(a.out_dir, "request-cost", lines, {"model_us": model_us, "ideal": ideal, "rounds": rounds})


if __name__ == "__main__":
    main()
