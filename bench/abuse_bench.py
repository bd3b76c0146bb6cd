#!/usr/bin/env python3
"""Limits under abuse (issue 37's load test): a normal client's latency while misbehaving clients do their worst,
against the same client on an idle server. The server (the example repository's tiny_mlp, default limits) is loaded
by `inferd bench` at concurrency 4 for 10 s twice -- once alone, once while this script runs, at the same time:

  idle        1,000 connections that never send a byte
  slowloris   50 connections sending a header one line a second, never finishing it
  oversized   requests announcing a 1 GiB body (refused with 413 from the header)
  deep JSON   2-million-'[' bodies (refused at --json-max-depth)
  streams     one gRPC connection with 500 ModelStreamInfer streams open and silent

twice: paced (oversized 100 and deep JSON 10 a second) and as a flood (as fast as this script sends them: thousands
of connections a second). The report gives the normal client's p50/p99 and errors in each run and the p99 ratios.
Target: p99 within 2x of idle, no errors. The abusers share the machine's two cores with the server and the load
generator: a flood's own CPU is taken from both.

  /usr/bin/python3 bench/abuse_bench.py --inferd build/src/inferd
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import threading
import time

import grpc

import run_bench as rb

ROOT = rb.ROOT


def process_cpu_s(pid):
    """CPU seconds (user + system) `pid` has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSplit:
    """Where the machine's CPU went during one run: the server, the load generator (this script's children) and
    the abusers (this script's own threads), in cores."""

    def __init__(self, server_pid):
        self.pid = server_pid
        self.t0 = time.monotonic()
        self.server0 = process_cpu_s(server_pid)
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        self.kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)

    def cores(self):
        wall = time.monotonic() - self.t0
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        used = lambda b, a: (b.ru_utime - a.ru_utime) + (b.ru_stime - a.ru_stime)  # noqa: E731
        return {"server": (process_cpu_s(self.pid) - self.server0) / wall,
                "load_generator": used(kids, self.kids0) / wall,
                "abusers": used(me, self.self0) / wall}


def normal_load(binary, port, work, tag):
    path = os.path.join(work, "row-%s.json" % tag)
    subprocess.run([binary, "bench", "-m", "tiny_mlp", "--label", tag, "--output", path, "--url",
                    "http://127.0.0.1:%d" % port, "--warmup-s", "1", "--duration-s", "10", "--concurrency", "4"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["rows"][0]


class Abusers:
    def __init__(self, port, grpc_port, flood):
        self.port, self.grpc_port = port, grpc_port
        self.pause = {"oversized": 0.0, "deep": 0.0} if flood else {"oversized": 0.01, "deep": 0.1}
        self.stop = threading.Event()
        self.counts = {"idle": 0, "slowloris": 0, "oversized": 0, "deep_json": 0, "streams": 0}
        self.sockets, self.threads, self.calls = [], [], []
        self.channel = None

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def start(self):
        for _ in range(1000):
            self.sockets.append(self.connect())
            self.counts["idle"] += 1
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self.slowloris, self.oversized, self.deep)]
        for t in self.threads:
            t.start()
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        call = self.channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                          request_serializer=lambda b: b, response_deserializer=lambda b: b)

        def silent():
            self.stop.wait()
            return
            yield  # noqa: a generator that sends nothing until the end

        for _ in range(500):
            self.calls.append(call(silent()))
            self.counts["streams"] += 1

    def slowloris(self):
        conns = [self.connect() for _ in range(50)]
        for c in conns:
            c.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\n")
        while not self.stop.wait(1.0):
            for i, c in enumerate(conns):
                try:
                    c.sendall(b"X-Slow: 1\r\n")
                except OSError:  # cut off at the header deadline: come back
                    conns[i] = self.connect()
                    conns[i].sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\n")
                self.counts["slowloris"] += 1
        for c in conns:
            c.close()

    def oversized(self):
        while not self.stop.is_set():
            with self.connect() as c:
                c.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n")
                c.recv(4096)
            self.counts["oversized"] += 1
            self.stop.wait(self.pause["oversized"])

    def deep(self):
        body = b'{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1], "data": ' + b"[" * 2_000_000 + b"}"
        head = b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        while not self.stop.is_set():
            with self.connect() as c:
                c.sendall(head + body)
                c.recv(4096)
            self.counts["deep_json"] += 1
            self.stop.wait(self.pause["deep"])

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)
        for s in self.sockets:
            s.close()
        for c in self.calls:
            c.cancel()
        if self.channel:
            self.channel.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    work, repo = rb.example_repo("inferd-abuse-")
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port",
                 str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    try:
        cpu = {}
        split = CpuSplit(p.p.pid)
        idle = normal_load(a.inferd, port, work, "idle")
        cpu["idle"] = split.cores()
        runs, counts = {}, {}
        for mode in ("paced", "flood"):
            abusers = Abusers(port, gport, flood=mode == "flood")
            abusers.start()
            split = CpuSplit(p.p.pid)
            try:
                runs[mode] = normal_load(a.inferd, port, work, mode)
            finally:
                cpu[mode] = split.cores()
                abusers.finish()
            counts[mode] = abusers.counts
        after = normal_load(a.inferd, port, work, "after")
    finally:
        p.stop()
    lines = [
        "# Limits under abuse (issue 37): tiny_mlp, a normal client at concurrency 4, idle vs abused",
        "",
        "%s, %d cores; `%s`; default limits" % (rb.cpu_model(), os.cpu_count(), a.inferd),
        "",
        "| run | req/s | p50 us | p99 us | p99 / idle | errors | cores: server | load generator | abusers |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tag, key, row in (("idle", "idle", idle), ("abused, paced", "paced", runs["paced"]),
                          ("abused, flood", "flood", runs["flood"]), ("after the abuse", None, after)):
        c = cpu.get(key)
        lines.append("| %s | %.0f | %.0f | %.0f | %.2f | %d | %s |" % (
            tag, row["requests_per_s"], row["p50_us"], row["p99_us"], row["p99_us"] / idle["p99_us"],
            row.get("errors", 0),
            " | ".join("%.2f" % c[k] for k in ("server", "load_generator", "abusers")) if c else " | | "))
    lines.append("")
    for mode in ("paced", "flood"):
        lines.append("Abuse during the %s run: %s." % (mode, ", ".join("%s %d" % kv for kv in counts[mode].items())))
    lines.append("")
    for mode in ("paced", "flood"):
        ratio = runs[mode]["p99_us"] / idle["p99_us"]
        errors = runs[mode].get("errors", 0)
        lines.append("Target (%s): p99 within 2x of idle and no errors: %.2fx, %d errors (%s)." % (
            mode, ratio, errors, "met" if ratio <= 2 and not errors else "not met"))
    lines += ["", "Cores: CPU seconds per second of the run (user + system; the machine has %d). The abusers' share is "
              "this script's own threads; the kernel's TCP work for their connections is counted where it runs (mostly "
              "in the server's and the abusers' system time)." % os.cpu_count()]
    rb.write_results(a.out_dir, "abuse", lines, {"idle": idle, "runs": runs, "after": after, "abuse": counts,
                                                 "cores": cpu})


if __name__ == "__main__":
    main()
