#!/usr/bin/python3
"""Cluster mode (issue 35): 3 inferd nodes and Debian's etcd on loopback, one shared repository of tiny models.

Reports (never asserts), in one run:
  1. start-up over a --startup-models repository (hard links of one tiny model: indexing, not loading): each node
     from its process start to /v2/health/ready, and to seeing all 3 nodes in its view;
  2. forwarding overhead: a tiny model's p50 at concurrency 1 through a node that does not hold it minus directly at
     a holder (`inferd bench`, rounds alternated);
  3. throughput with 3 nodes (a client per node, each asking for a model its node holds) against one node (one
     client with the same total concurrency); on a 2-core machine the 3 nodes share the cores one node has;
  4. Zipf traffic over --models models from clients spread over the nodes, kill -9 of one node under load: failed
     requests on the surviving nodes' connections, and the time from the killed node's lease expiry until every
     model that kept a copy has 2 live copies again;
  5. etcd stopped for --outage-s under the same traffic and started again: failed requests, and the time from the
     restart until the registry is consistent (every held model placed on its holder, no placement naming a node
     that does not hold the model, no node missing).

Usage: cluster_bench.py --inferd build/src/inferd [--models 10000] [--startup-models 100000] [--out FILE]
"""
import argparse
import bisect
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
sys.path.insert(0, HERE)
import etcd_server  # noqa: E402
import inferd_client as ic  # noqa: E402
from many_models import metric, pct  # noqa: E402

BODY = json.dumps({"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.5] * 8}]})
NODES = ("a", "b", "c")
TTL_S = 3
REFRESH_MS = 200


def make_repository(path, n):
    """n tiny distinct models (bench/make_tenant_models.py), generated once."""
    if not os.path.isdir(os.path.join(path, "tenant_%05d" % (n - 1))):
        ic.remove_repository(path)
        subprocess.check_call([sys.executable, os.path.join(HERE, "make_tenant_models.py"), path, str(n)])
    return path


def make_linked_repository(path, source, n):
    """n models whose files are hard links of `source`'s (in turn): a big repository to index, cheap to make."""
    if os.path.isdir(os.path.join(path, "m%06d" % (n - 1))):
        return path
    ic.remove_repository(path)
    sources = sorted(os.listdir(source))
    for i in range(n):
        src = os.path.join(source, sources[i % len(sources)])
        d = os.path.join(path, "m%06d" % i)
        os.makedirs(os.path.join(d, "1"))
        os.link(os.path.join(src, "config.pbtxt"), os.path.join(d, "config.pbtxt"))
        os.link(os.path.join(src, "1", "model.pt"), os.path.join(d, "1", "model.pt"))
    return path


class Cluster:
    """etcd and 3 nodes over one repository (on-demand residency)."""

    def __init__(self, inferd, repo, workdir, *extra):
        self.inferd, self.repo, self.workdir, self.extra = inferd, repo, workdir, extra
        self.etcd = etcd_server.EtcdServer()
        self.nodes = {}

    def start(self, name):
        t0 = time.monotonic()
        node = ic.Server(self.inferd, self.repo, "--control-state-dir", os.path.join(self.workdir, name),
                         "--cluster", self.etcd.url, "--cluster-node-id", name, "--cluster-lease-ttl-secs",
                         str(TTL_S), "--cluster-refresh-ms", str(REFRESH_MS), "--model-residency", "on-demand",
                         *self.extra)
        node.t0 = t0
        self.nodes[name] = node
        return node

    def start_all(self):
        threads = [threading.Thread(target=self.start, args=(n,)) for n in NODES]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def view(self, name):
        st, _, body = self.nodes[name].request("GET", "/v2/cluster")
        return json.loads(body) if st == 200 else None

    def wait(self, predicate, what, timeout=60, every=0.05):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError("timed out waiting for " + what)
            time.sleep(every)
        return time.monotonic()

    def sees(self, name, ids):
        v = self.view(name)
        return v is not None and sorted(n["id"] for n in v["nodes"]) == sorted(ids) and v["store_reachable"]

    def registry(self):
        """(placements {model: [nodes]}, held {node: set(models)}) as etcd has them."""
        placements = {k.rsplit("/", 1)[1]: json.loads(v).get("nodes", [])
                      for k, v in self.etcd.get_prefix("/inferd/default/placement/").items()}
        held = {k.rsplit("/", 1)[1]: set(json.loads(v)["models"])
                for k, v in self.etcd.get_prefix("/inferd/default/nodes/").items()}
        return placements, held

    def close(self):
        for node in self.nodes.values():
            if node.proc.poll() is None:
                node.stop()
        self.etcd.close()


def bench_json(inferd, url, model, concurrency, seconds):
    out = tempfile.mktemp(suffix=".json")
    subprocess.check_call([inferd, "bench", "-m", model, "--url", url, "--concurrency", str(concurrency),
                           "--duration-s", str(seconds), "--warmup-s", "1", "--output", out],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        rows = json.load(f)
    os.unlink(out)
    row = rows["rows"][0]
    assert row["errors"] == 0, row
    return row


def process_cpu_s(pid):
    """User + system CPU seconds process `pid` has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    """CPU seconds of this process's finished children (the `inferd bench` clients)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class CpuMeter:
    """Where a throughput run's CPU went: the three servers, the clients, over the wall time."""

    def __init__(self, c):
        self.c = c
        self.start = self.sample()

    def sample(self):
        return (sum(process_cpu_s(self.c.nodes[n].proc.pid) for n in NODES), children_cpu_s(), time.monotonic())

    def done(self):
        end = self.sample()
        servers, clients, wall = (e - s for e, s in zip(end, self.start))
        return {"servers_cpu_s": servers, "clients_cpu_s": clients, "wall_s": wall,
                "cores_busy": (servers + clients) / wall}


def row_p50_us(row):
    return float(row["p50_us"])


def row_rps(row):
    return float(row["requests_per_s"])


def phase_startup(args, repo):
    workdir = tempfile.mkdtemp(prefix="inferd-cluster-startup-")
    c = Cluster(args.inferd, repo, workdir)
    try:
        c.start_all()
        ready, joined = {}, {}
        for name, node in c.nodes.items():
            t = c.wait(lambda: node.request("GET", "/v2/health/ready")[0] == 200, name + " ready", every=0.01)
            ready[name] = t - node.t0
        for name, node in c.nodes.items():
            t = c.wait(lambda: c.sees(name, NODES), name + " seeing 3 nodes", every=0.01)
            joined[name] = t - node.t0
        indexed = [line for node in c.nodes.values() for line in node.log if "indexed" in line]
    finally:
        c.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"ready": ready, "joined": joined, "indexed": indexed}


def placed_on(c, model, via):
    """Uses `model` once through `via` and waits for its 2 copies to be loaded; returns the holders."""
    st, body = c.nodes[via].post_json("/v2/models/%s/infer" % model, json.loads(BODY))
    assert st == 200, body

    def two_copies():
        placements, held = c.registry()
        nodes = placements.get(model, [])
        return len(nodes) == 2 and all(model in held.get(n, ()) for n in nodes)
    c.wait(two_copies, model + " on 2 nodes")
    holders = c.registry()[0][model]
    # Every node's view has both copies (so a non-holder forwards instead of loading it).
    c.wait(lambda: all(sum(1 for n in (c.view(x) or {"nodes": []})["nodes"] if n["id"] in holders and n["models"] > 0)
                       == 2 for x in NODES), "views with both copies")
    return holders


def phase_forwarding(args, repo):
    workdir = tempfile.mkdtemp(prefix="inferd-cluster-fwd-")
    # No copies by request rate here: at c1 the model's rate would give the non-holder a copy of its own within a
    # second, and the "through a non-holder" rounds would measure local serving.
    c = Cluster(args.inferd, repo, workdir, "--cluster-copy-rate", "0")
    try:
        c.start_all()
        c.wait(lambda: all(c.sees(n, NODES) for n in NODES), "3 nodes")
        model = "tenant_00000"
        holders = placed_on(c, model, "a")
        other = next(n for n in NODES if n not in holders)
        url = {n: "http://127.0.0.1:%d" % c.nodes[n].port for n in NODES}
        direct, via = [], []
        for _ in range(args.rounds):
            direct.append(row_p50_us(bench_json(args.inferd, url[holders[0]], model, 1, args.seconds)))
            # The metadata read through the non-holder too, as a client does: forwarded to a holder (before
            # 2026-11-28 it loaded the model there, and these rounds measured local serving).
            via.append(row_p50_us(bench_json(args.inferd, url[other], model, 1, args.seconds)))
        fwd = metric(c.nodes[other].metrics(), "inferd_cluster_forwarded_requests_total")
        assert model not in c.registry()[1].get(other, ()), "the non-holder loaded the model: nothing was forwarded"
        # Throughput: one client per node, each asking for a model its node holds, against one node alone.
        local = {}
        for i, n in enumerate(NODES):
            m = "tenant_%05d" % (10 + i)
            local[n] = m
            placed_on(c, m, n)
        total_c = 3 * args.concurrency
        meter = CpuMeter(c)
        one = row_rps(bench_json(args.inferd, url["a"], local["a"], total_c, args.seconds))
        cpu_one = meter.done()
        results = {}

        def run(n):
            results[n] = row_rps(bench_json(args.inferd, url[n], local[n], args.concurrency, args.seconds))
        threads = [threading.Thread(target=run, args=(n,)) for n in NODES]
        meter = CpuMeter(c)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu_three = meter.done()
        three = sum(results.values())
        served_here = {n: metric(c.nodes[n].metrics(), "inferd_cluster_forwarded_requests_total") for n in NODES}
    finally:
        c.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"direct": direct, "via": via, "forwarded": fwd, "one_rps": one, "three_rps": three, "per_node": results,
            "forwards_during_throughput": served_here, "total_c": total_c, "cpu_one": cpu_one,
            "cpu_three": cpu_three}


class ZipfLoad:
    """Client threads spread over the nodes, Zipf over the models; failures counted per node."""

    def __init__(self, c, n_models, clients, zipf_s):
        self.c = c
        weights = [1.0 / (r + 1) ** zipf_s for r in range(n_models)]
        self.cdf, acc = [], 0.0
        for w in weights:
            acc += w
            self.cdf.append(acc)
        self.acc = acc
        self.perm = list(range(n_models))
        random.Random(7).shuffle(self.perm)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = {n: 0 for n in NODES}
        self.failed = {n: [] for n in NODES}  # (time, status or error)
        self.seen = set()
        self.threads = [threading.Thread(target=self.client, args=(i, NODES[i % len(NODES)])) for i in range(clients)]

    def client(self, seed, node_name):
        rnd = random.Random(seed)
        node = self.c.nodes[node_name]
        conn = node.conn()
        while not self.stop.is_set():
            name = "tenant_%05d" % self.perm[bisect.bisect_left(self.cdf, rnd.random() * self.acc)]
            try:
                conn.request("POST", "/v2/models/%s/infer" % name, body=BODY)
                r = conn.getresponse()
                r.read()
                status = r.status
            except OSError as e:
                status = type(e).__name__
                conn.close()
                if node.proc.poll() is not None:
                    with self.lock:
                        self.failed[node_name].append((time.monotonic(), status))
                    return  # this node was killed: its clients stop
                conn = node.conn()
            with self.lock:
                if status == 200:
                    self.ok[node_name] += 1
                    self.seen.add(name)
                else:
                    self.failed[node_name].append((time.monotonic(), status))
        conn.close()

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def counts(self, nodes, since=0.0):
        with self.lock:
            return (sum(self.ok[n] for n in nodes),
                    [f for n in nodes for f in self.failed[n] if f[0] >= since])


def under_replicated(c, live, models):
    """Of `models` (those the killed node held a copy of), the ones with a surviving copy but fewer than 2 live
    copies loaded, and the ones with none (placement and holders as etcd has them). Models first used since keep
    arriving with one copy until the next round: they are not the failure's."""
    placements, held = c.registry()
    short, lost = 0, 0
    for model in models:
        holding = [n for n in placements.get(model, []) if n in live and model in held.get(n, ())]
        if not holding:
            lost += 1
        elif len(holding) < 2:
            short += 1
    return short, lost


def loading(c, name):
    """The models node `name` is loading or has queued (its repository index says LOADING)."""
    st, index = c.nodes[name].post_json("/v2/repository/index", {})
    return {e["name"] for e in index if e.get("state") == "LOADING"} if st == 200 else set()


def inconsistent(c, live, models):
    """Registry problems, over `models` (those held when etcd came back): nodes missing, a held model not placed on
    its holder, a placement naming a node that neither holds the model nor is loading it (a phantom; a copy being
    loaded is work in progress)."""
    placements, held = c.registry()
    busy = {n: loading(c, n) for n in live}
    missing = sorted(set(live) - set(held))
    unplaced = sum(1 for n, ms in held.items() for m in ms if m in models and n not in placements.get(m, []))
    phantom = {(m, n) for m in models for n in placements.get(m, [])
               if m not in held.get(n, ()) and m not in busy.get(n, ())}
    return missing, unplaced, phantom


def phase_failures(args, repo):
    workdir = tempfile.mkdtemp(prefix="inferd-cluster-fail-")
    c = Cluster(args.inferd, repo, workdir, "--model-load-threads", "2")
    out = {}
    try:
        c.start_all()
        c.wait(lambda: all(c.sees(n, NODES) for n in NODES), "3 nodes")
        load = ZipfLoad(c, args.models, args.clients, args.zipf_s)
        load.start()

        def reads():
            m = c.nodes["a"].metrics()
            return [metric(m, "inferd_cluster_" + n) for n in ("rounds_total", "placement_keys_read_total",
                                                                "placement_full_reads_total")]
        time.sleep(args.warmup_s / 2)
        reads_before = reads()
        time.sleep(args.warmup_s / 2)
        # The placements a round reads (by their changes) against all of them (what a full read each round took).
        rounds, keys, full = [b - a for a, b in zip(reads_before, reads())]
        out["placement_reads"] = {"rounds": rounds, "keys": keys, "full": full}
        # kill -9 of c under load.
        ok_before, _ = load.counts(NODES)
        survivors = ("a", "b")
        placements, _ = c.registry()
        out["placed_before_kill"] = len(placements)
        victim = {m for m, nodes in placements.items() if "c" in nodes}
        out["on_victim"] = len(victim)
        t_kill = time.monotonic()
        c.nodes["c"].proc.send_signal(signal.SIGKILL)
        c.nodes["c"].proc.wait(timeout=60)
        t_gone = c.wait(lambda: not any(n["id"] == "c" for n in (c.view("a") or {"nodes": [{"id": "c"}]})["nodes"]),
                        "c's lease expiry", timeout=TTL_S + 30, every=0.02)
        out["lease_expiry_after_kill_s"] = t_gone - t_kill
        samples = []

        def repaired():
            short, lost = under_replicated(c, survivors, victim)
            samples.append((round(time.monotonic() - t_gone, 2), short, lost))
            out["lost"] = lost
            return short == 0
        try:
            t_rep = c.wait(repaired, "2 copies again", timeout=args.repair_timeout_s, every=0.2)
            out["repair_s"] = t_rep - t_gone
        except RuntimeError:
            out["repair_s"] = float("nan")
        out["repair_samples"] = samples[::max(1, len(samples) // 8)]
        time.sleep(2)
        ok_after_kill, failed_kill = load.counts(survivors, since=t_kill)
        _, failed_victim = load.counts(("c",), since=t_kill)
        out["kill"] = {"ok": ok_after_kill - 0, "failed": failed_kill, "victim_failed": len(failed_victim),
                       "ok_before": ok_before}
        out["re_replications"] = sum(metric(c.nodes[n].metrics(), "inferd_cluster_re_replications_total")
                                     for n in survivors)
        # etcd stopped for outage_s under load, then started again (its data kept).
        t_stop = time.monotonic()
        c.etcd.stop()
        time.sleep(args.outage_s)
        ok_mid, failed_mid = load.counts(survivors, since=t_stop)
        c.etcd.start()
        t_start = time.monotonic()
        # What the nodes held when etcd came back: their records (the leases outlived the outage: etcd renews
        # them on its restart) as they publish them in their first rounds after it.
        held_at_restart = set()
        c.wait(lambda: set(c.registry()[1]) >= set(survivors), "the node records after the restart", timeout=30,
               every=0.05)
        for ms in c.registry()[1].values():
            held_at_restart |= ms
        out["held_at_restart"] = len(held_at_restart)
        checks = []

        last_phantoms = set()

        def consistent():
            # A copy loaded a moment ago is in its node's record from its next round on: a phantom counts when the
            # check before (a second or more earlier) saw it too.
            nonlocal last_phantoms
            missing, unplaced, phantom = inconsistent(c, survivors, held_at_restart)
            lasting = phantom & last_phantoms
            last_phantoms = phantom
            checks.append((round(time.monotonic() - t_start, 2), len(missing), unplaced, len(phantom), len(lasting)))
            return not missing and unplaced == 0 and not lasting
        try:
            out["consistent_s"] = c.wait(consistent, "a consistent registry", timeout=60, every=0.2) - t_start
        except RuntimeError:
            out["consistent_s"] = float("nan")
        out["consistency_samples"] = checks[::max(1, len(checks) // 8)]
        time.sleep(2)
        ok_end, failed_outage = load.counts(survivors, since=t_stop)
        load.finish()
        out["outage"] = {"ok_during": ok_mid, "failed_during": len(failed_mid), "ok": ok_end,
                         "failed": failed_outage}
        out["distinct"] = len(load.seen)
        out["store_errors"] = {n: metric(c.nodes[n].metrics(), "inferd_cluster_store_errors_total")
                               for n in survivors}
    finally:
        c.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--workdir", default="/tmp/inferd-cluster-bench")
    ap.add_argument("--models", type=int, default=10000)
    ap.add_argument("--startup-models", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3, help="forwarding overhead: alternated rounds")
    ap.add_argument("--seconds", type=float, default=5, help="each inferd bench measurement")
    ap.add_argument("--concurrency", type=int, default=4, help="throughput: clients per node")
    ap.add_argument("--clients", type=int, default=6, help="Zipf phase: client threads, spread over the nodes")
    ap.add_argument("--zipf-s", type=float, default=1.0)
    ap.add_argument("--warmup-s", type=float, default=20, help="Zipf traffic before the kill")
    ap.add_argument("--repair-timeout-s", type=float, default=60)
    ap.add_argument("--outage-s", type=float, default=30)
    ap.add_argument("--phases", default="startup,forwarding,failures")
    ap.add_argument("--out", help="append the markdown report to this file")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    phases = args.phases.split(",")
    t0 = time.time()
    repo = make_repository(os.path.join(args.workdir, "tenants_%d" % args.models), args.models)
    big = None
    if "startup" in phases:
        big = make_linked_repository(os.path.join(args.workdir, "linked_%d" % args.startup_models), repo,
                                     args.startup_models)
    gen_s = time.time() - t0
    lines = ["## Cluster mode: 3 nodes + etcd on loopback (%d-model repository; lease %d s, refresh %d ms)" % (
        args.models, TTL_S, REFRESH_MS), "", "| measurement | value | target |", "|---|---|---|",
        "| generate repositories | %.1f s (skipped if present) | |" % gen_s]
    raw = {}
    if "startup" in phases:
        s = phase_startup(args, big)
        raw["startup"] = s
        lines.append("| start-up over %d models: process start to ready, per node | %s | <= 5 s |" % (
            args.startup_models, ", ".join("%s %.2f s" % (n, s["ready"][n]) for n in NODES)))
        lines.append("| ... to seeing all 3 nodes | %s | |" % ", ".join("%s %.2f s" % (n, s["joined"][n])
                                                                       for n in NODES))
    if "forwarding" in phases:
        f = phase_forwarding(args, repo)
        raw["forwarding"] = f
        d, v = sorted(f["direct"])[len(f["direct"]) // 2], sorted(f["via"])[len(f["via"]) // 2]
        lines.append("| tiny model c1 p50: at a holder / through a non-holder (median of %d rounds; %d requests "
                     "forwarded) | %.0f / %.0f us | |" % (args.rounds, f["forwarded"], d, v))
        lines.append("| forwarding overhead p50 | **%.0f us** | <= 300 us |" % (v - d))
        lines.append("| throughput: 3 nodes (c%d each, local models) / 1 node (c%d) | %.0f / %.0f req/s = "
                     "**%.2fx** | >= 2.5x with unshared cores |" % (args.concurrency, f["total_c"], f["three_rps"],
                                                                   f["one_rps"], f["three_rps"] / f["one_rps"]))
        for label, key in (("1 node", "cpu_one"), ("3 nodes", "cpu_three")):
            u = f[key]
            lines.append("| ... CPU of the %s run: servers %.1f s + clients %.1f s over %.1f s = **%.2f cores busy** "
                         "(of %d) | | |" % (label, u["servers_cpu_s"], u["clients_cpu_s"], u["wall_s"],
                                            u["cores_busy"], os.cpu_count()))
    if "failures" in phases:
        x = phase_failures(args, repo)
        raw["failures"] = x
        k, o = x["kill"], x["outage"]
        lines += [
            "| Zipf traffic: %d client threads over 3 nodes, %d distinct models used | %d models placed before the "
            "kill, %d of them on the victim | |" % (args.clients, x["distinct"], x["placed_before_kill"],
                                                    x["on_victim"]),
            "| placements read per round by a node under that traffic (by their changes; %d full reads in %d "
            "rounds) | **%.1f** (a full read each round: %d) | |" % (
                x["placement_reads"]["full"], x["placement_reads"]["rounds"],
                x["placement_reads"]["keys"] / max(1, x["placement_reads"]["rounds"]), x["placed_before_kill"]),
            "| kill -9 of one node under load: requests on the survivors' connections ok / failed | %d / **%d** | "
            "0 failed |" % (k["ok"], len(k["failed"])),
            "| ... its lease expired after | %.1f s | |" % x["lease_expiry_after_kill_s"],
            "| ... every model with a surviving copy back to 2 live copies, after the lease expiry | **%.1f s** "
            "(%d copies added) | <= 10 s |" % (x["repair_s"], x["re_replications"]),
            "| ... of the victim's models, those whose every copy was on it (placed again on next use) | %d | |" %
            x["lost"],
            "| etcd stopped %.0f s under load: requests ok / failed | %d / **%d** | 0 failed |" % (
                args.outage_s, o["ok_during"], o["failed_during"]),
            "| ... registry consistent after etcd's restart (the %d models held then: each placed on every holder, no "
            "placement naming a node that neither holds nor loads it in two checks running, no node missing) | **%.1f s** | <= 10 s |" % (x["held_at_restart"], x["consistent_s"]),
        ]
        if k["failed"]:
            lines.append("| ... failures on survivors (first 5) | %s | |" % k["failed"][:5])
    lines.append("")
    report = "\n".join(lines)
    print(report)
    with open(os.path.join(args.workdir, "cluster_bench.json"), "w") as fh:
        json.dump(raw, fh, indent=1, default=str)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(report + "\n")


if __name__ == "__main__":
    main()
