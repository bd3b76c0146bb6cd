#!/usr/bin/env python3
"""What tracing costs (issue 36's bench row): the example repository's tiny_mlp served by one inferd binary in
three configurations, round after round in alternating order, each measured by `inferd bench` (c1 p50 latency and
c32 throughput over HTTP, keep-alive):

  off      no --trace-config (the request path's only cost: a pointer test where a span would start)
  default  --trace-config mode=opentelemetry (Triton's default rate: one request in 1,000 traced)
  all      ... rate=1: every request traced, its 4 spans exported over OTLP/HTTP (protobuf)

The collector is Debian's nginx answering 200 to every POST /v1/traces (bench/baselines/otlp_sink.conf.in): it reads
and drops the bodies, so the cost measured is inferd's (recording, encoding, sending), not a collector's. The report
gives the medians, the ratios to `off`, each configuration's spread over its rounds (the noise), and the spans the
server exported and dropped. Target: `all` >= 0.90 of `off` at c32.

  /usr/bin/python3 bench/tracing_bench.py --inferd build/src/inferd [--rounds 6]
"""
import argparse
import os
import re
import statistics
import subprocess
import urllib.request

import request_path_ab as ab
import run_bench as rb

ROOT = rb.ROOT
CONFIGS = ("off", "default", "all")


def trace_flags(config, sink_port):
    if config == "off":
        return []
    flags = ["--trace-config", "mode=opentelemetry",
             "--trace-config", "opentelemetry,url=http://127.0.0.1:%d/v1/traces" % sink_port]
    if config == "all":
        flags += ["--trace-config", "rate=1"]
    return flags


def span_counters(mport):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=30).read().decode()
    out = {}
    for name, key in (("inferd_trace_spans_exported_total", "exported"),
                      ('inferd_trace_spans_dropped_total{reason="queue_full"}', "dropped_queue_full"),
                      ('inferd_trace_spans_dropped_total{reason="export_failed"}', "dropped_export_failed")):
        m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text, re.M)
        out[key] = float(m.group(1)) if m else 0.0
    return out


def measure(binary, repo, work, config, sink_port):
    return ab.measure(binary, binary, repo, work, config, extra=trace_flags(config, sink_port),
                      after=(lambda mport: span_counters(mport) if config != "off" else {}))


def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) * 100 if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    work, repo = rb.example_repo("inferd-tracing-")
    sink_port = rb.free_port()
    ndir = os.path.join(work, "nginx")
    os.makedirs(ndir)
    conf = open(os.path.join(ROOT, "bench", "baselines", "otlp_sink.conf.in")).read()
    conf = conf.replace("@PORT@", str(sink_port)).replace("@DIR@", ndir)
    open(os.path.join(ndir, "nginx.conf"), "w").write(conf)
    sink = subprocess.Popen(["/usr/sbin/nginx", "-c", os.path.join(ndir, "nginx.conf"), "-e",
                             os.path.join(ndir, "err.log")], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    rb.wait_http(sink_port, "/v1/traces")
    res = {c: {"p50": [], "rps": [], "spans": []} for c in CONFIGS}
    try:
        for r in range(a.rounds):
            order = CONFIGS if r % 2 == 0 else tuple(reversed(CONFIGS))
            for config in order:
                p50, rps, spans = measure(a.inferd, repo, work, config, sink_port)
                res[config]["p50"].append(p50)
                res[config]["rps"].append(rps)
                res[config]["spans"].append(spans)
                print("round %d %-8s c1 p50 %7.0f us   c32 %8.0f req/s  %s" % (r + 1, config, p50, rps, spans or ""),
                      flush=True)
    finally:
        sink.terminate()
        sink.wait(30)
    off_p50, off_rps = statistics.median(res["off"]["p50"]), statistics.median(res["off"]["rps"])
    lines = [
        "# What tracing costs (issue 36): tiny_mlp over HTTP, %d rounds, order alternating" % a.rounds,
        "",
        "%s, %d cores; `%s`; collector: nginx dropping every OTLP body (bench/baselines/otlp_sink.conf.in)" % (
            rb.cpu_model(), os.cpu_count(), a.inferd),
        "",
        "| configuration | c1 p50 (us) | / off | c32 req/s | / off | spread p50 / rps | spans exported / dropped "
        "(last round) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for config in CONFIGS:
        p50, rps = statistics.median(res[config]["p50"]), statistics.median(res[config]["rps"])
        last = res[config]["spans"][-1]
        spans = "%.0f / %.0f" % (last.get("exported", 0), last.get("dropped_queue_full", 0) +
                                 last.get("dropped_export_failed", 0)) if last else "-"
        lines.append("| %s | %.0f | %.3f | %.0f | %.3f | %.1f%% / %.1f%% | %s |" % (
            config, p50, p50 / off_p50, rps, rps / off_rps, spread(res[config]["p50"]), spread(res[config]["rps"]),
            spans))
    ratio = statistics.median(res["all"]["rps"]) / off_rps
    lines += ["", "Target: every request traced >= 0.90 of tracing off at c32: %.3f (%s)." % (
        ratio, "met" if ratio >= 0.90 else "not met")]
    rb.write_results(a.out_dir, "tracing", lines, res)


if __name__ == "__main__":
    main()
