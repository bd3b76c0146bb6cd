#!/usr/bin/env python3
"""What TLS costs (issue 37's bench row): the example repository's tiny_mlp served by one inferd binary over plain
HTTP and over TLS (--tls-cert-file/--tls-key-file, an ECDSA P-256 certificate made here with the openssl CLI), round
after round in alternating order, each measured by `inferd bench` (c1 p50 latency and c32 throughput, keep-alive:
one handshake per connection, then the records' encryption) -- the same load generator, over TLS with its own
OpenSSL client. The report gives the medians, the ratios to plain HTTP and each configuration's spread over its
rounds (the noise).

  /usr/bin/python3 bench/tls_bench.py --inferd build/src/inferd [--rounds 6]
"""
import argparse
import json
import os
import ssl
import statistics
import subprocess
import time
import urllib.request

import run_bench as rb
from request_path_ab import spread

ROOT = rb.ROOT
CONFIGS = ("plain", "tls")


def make_certificate(d):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", "/CN=inferd bench", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", os.path.join(d, "key.pem"), "-out", os.path.join(d, "cert.pem")],
                   check=True, capture_output=True, timeout=120)
    return os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")


def wait_ready(url, ctx, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=5, context=ctx) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("inferd did not become ready at " + url)
        time.sleep(0.2)


def measure(binary, repo, work, config, cert, key):
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    extra = ["--tls-cert-file", cert, "--tls-key-file", key] if config == "tls" else []
    scheme = "https" if config == "tls" else "http"
    url = "%s://127.0.0.1:%d" % (scheme, port)
    log = open(os.path.join(work, "inferd-%s.log" % config), "w")
    p = subprocess.Popen([binary, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port",
                          str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn", *extra],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    out = {}
    try:
        wait_ready(url, ssl.create_default_context(cafile=cert) if config == "tls" else None)
        for c in (1, 32):
            path = os.path.join(work, "row.json")
            cmd = [binary, "bench", "-m", "tiny_mlp", "--label", config, "--output", path, "--url", url,
                   "--warmup-s", "1", "--window-s", "1", "--max-windows", "4", "--concurrency", str(c)]
            if config == "tls":
                cmd += ["--cacert", cert]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                row = json.load(f)["rows"][0]
            if row.get("errors"):
                raise RuntimeError("%s: %d errors at concurrency %d" % (config, row["errors"], c))
            out[c] = row
    finally:
        p.terminate()
        p.wait(60)
        log.close()
    return out[1]["p50_us"], out[32]["requests_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    work, repo = rb.example_repo("inferd-tls-")
    cert, key = make_certificate(work)
    res = {c: {"p50": [], "rps": []} for c in CONFIGS}
    for r in range(a.rounds):
        for config in (CONFIGS if r % 2 == 0 else tuple(reversed(CONFIGS))):
            p50, rps = measure(a.inferd, repo, work, config, cert, key)
            res[config]["p50"].append(p50)
            res[config]["rps"].append(rps)
            print("round %d %-6s c1 p50 %7.0f us   c32 %8.0f req/s" % (r + 1, config, p50, rps), flush=True)
    base_p50, base_rps = statistics.median(res["plain"]["p50"]), statistics.median(res["plain"]["rps"])
    lines = [
        "# What TLS costs (issue 37): tiny_mlp over HTTP/1.1 keep-alive, %d rounds, order alternating" % a.rounds,
        "",
        "%s, %d cores; `%s`; TLS 1.3, ECDSA P-256 certificate; the load generator `inferd bench` (OpenSSL client)" % (
            rb.cpu_model(), os.cpu_count(), a.inferd),
        "",
        "| configuration | c1 p50 (us) | / plain | c32 req/s | / plain | spread p50 / rps |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for config in CONFIGS:
        p50, rps = statistics.median(res[config]["p50"]), statistics.median(res[config]["rps"])
        lines.append("| %s | %.0f | %.3f | %.0f | %.3f | %.1f%% / %.1f%% |" % (
            config, p50, p50 / base_p50, rps, rps / base_rps, spread(res[config]["p50"]), spread(res[config]["rps"])))
    rb.write_results(a.out_dir, "tls", lines, res)


if __name__ == "__main__":
    main()
