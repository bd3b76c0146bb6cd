"""Integration suite: cluster mode over a real etcd (run by run_tests.py).

Each test starts Debian's etcd on free loopback ports (etcd_server.py) and inferd nodes with --cluster; they share
one repository (links to the `mlp` fixture). Checked: membership (every node sees every node and what it holds),
kill -9 (the node leaves at its lease's expiry; the others keep answering), a graceful stop (leaves at once), etcd
down (nodes serve by their last view) and back, etcd restarted without its data (the registry is rebuilt from what
the nodes hold), a node restart (rejoins), the admin token on the cluster route, `inferd cluster status`, and bad
cluster flags (exit 2 with the reason)."""
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401
import etcd_server  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import llm_fixtures  # noqa: E402
import otlp_receiver  # noqa: E402
import suite_console  # noqa: E402
import tls_fixtures  # noqa: E402

TTL_S = 3  # the nodes' lease: a killed node leaves this long after its last renewal


class ClusterBase(unittest.TestCase):
    """etcd and the nodes of one test."""

    ssl_context = None  # a test whose nodes speak TLS: how the test's requests reach them

    def setUp(self):
        self.dir = os.path.abspath(os.path.join(C.ARGS.workdir, "cluster", self._testMethodName))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.repo = C.served_repository("cluster", ["mlp", "tiny_chat"])
        self.etcd = etcd_server.EtcdServer()
        self.nodes = {}

    def tearDown(self):
        try:
            for name, node in self.nodes.items():
                if node.proc.poll() is None:
                    self.assertEqual(node.stop(), 0, name + ":\n" + "".join(node.log[-30:]))
        finally:  # a failed stop must not leave etcd running
            self.etcd.close()

    def start_node(self, name, *extra, ttl=TTL_S):
        node = ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", os.path.join(self.dir, name),
                         "--cluster", self.etcd.url, "--cluster-node-id", name, "--cluster-lease-ttl-secs", str(ttl),
                         "--cluster-refresh-ms", "200", *extra)
        node.ssl_context = self.ssl_context
        self.nodes[name] = node
        return node

    def status(self, node, headers=None, joining_ok=False):
        """GET /v2/cluster; None while the node is still joining (503, only when `joining_ok`)."""
        st, _, body = node.request("GET", "/v2/cluster", headers=headers)
        if st == 503 and joining_ok:
            self.assertIn(b"joining", body)
            return None
        self.assertEqual(st, 200, body)
        return json.loads(body)

    def wait_view(self, node, ids, what, timeout=30, reachable=True):
        """Waits (bounded) until `node` sees exactly the nodes `ids`; returns its status."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status(node, joining_ok=True)
            if s and sorted(n["id"] for n in s["nodes"]) == sorted(ids) and s["store_reachable"] == reachable:
                return s
            self.assertLess(time.monotonic(), deadline, "timed out waiting for %s; last view: %s" % (what, s))

    def infer(self, node):
        x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
        st, body = node.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, body)
        y = np.array(body["outputs"][0]["data"], np.float32).reshape(1, -1)
        C.assert_matches_torch(y, C.torch_ref("mlp", x))

    def wait_view_with_token(self, node, token):
        deadline = time.monotonic() + 30
        while True:
            s = self.status(node, headers={"Authorization": "Bearer s3cret"}, joining_ok=True)
            if s and [n["id"] for n in s["nodes"]] == ["a"]:
                return
            self.assertLess(time.monotonic(), deadline, "a never saw itself: %s" % s)


class Cluster(ClusterBase):
    """Membership under eager residency (every node holds every model)."""

    # Tests that can share their etcd and nodes do (a node start under ASan costs seconds): each is a sequence.

    def test_nodes_see_each_other_then_a_killed_one_leaves_at_its_lease_expiry(self):
        self.nodes_see_each_other_and_what_they_hold()
        self.a_killed_node_leaves_at_its_lease_expiry_and_the_others_keep_serving()

    def nodes_see_each_other_and_what_they_hold(self):
        for name in ("a", "b", "c"):
            self.start_node(name)
        for name in ("a", "b", "c"):
            s = self.wait_view(self.nodes[name], ["a", "b", "c"], "three nodes in %s's view" % name)
            self.assertEqual(s["self"], name)
            self.assertTrue(s["registered"])
        s = self.status(self.nodes["a"])
        by_id = {n["id"]: n for n in s["nodes"]}
        self.assertEqual(by_id["b"]["http"], "127.0.0.1:%d" % self.nodes["b"].port)
        self.assertEqual(by_id["b"]["grpc"], "127.0.0.1:%d" % self.nodes["b"].grpc_port)
        self.assertEqual(by_id["a"]["self"], True)
        self.assertEqual(by_id["b"]["models"], 2)
        self.assertEqual(s["models"], 2)
        self.assertEqual(s["models_by_copies"], {"3": 2}, s)
        # What etcd holds: one record per node under its lease.
        keys = self.etcd.get_prefix("/inferd/default/nodes/")
        self.assertEqual(sorted(keys), ["/inferd/default/nodes/a", "/inferd/default/nodes/b", "/inferd/default/nodes/c"])
        self.assertEqual(json.loads(keys["/inferd/default/nodes/c"])["models"], ["mlp", "tiny_chat"])
        # The CLI renders the same view.
        out = subprocess.run([C.ARGS.inferd, "cluster", "status", "--url", "http://127.0.0.1:%d" % self.nodes["a"].port],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("seen from node a: 3 nodes, etcd reachable", out.stdout)
        self.assertRegex(out.stdout, r"\na \* +up +127\.0\.0\.1:%d " % self.nodes["a"].port)
        self.assertIn("models: 2 (3 copies: 2)", out.stdout)
        metrics = self.nodes["b"].metrics()
        self.assertEqual(C.metric(metrics, "inferd_cluster_nodes"), 3)
        self.assertEqual(C.metric(metrics, "inferd_cluster_store_reachable"), 1)
        self.assertEqual(C.metric(metrics, "inferd_cluster_registrations_total"), 1)

    def a_killed_node_leaves_at_its_lease_expiry_and_the_others_keep_serving(self):
        self.nodes["c"].proc.send_signal(signal.SIGKILL)
        self.nodes["c"].proc.wait(timeout=60)
        killed = time.monotonic()
        self.infer(self.nodes["a"])
        self.infer(self.nodes["b"])
        self.wait_view(self.nodes["a"], ["a", "b"], "c gone from a's view", timeout=TTL_S + 20)
        self.wait_view(self.nodes["b"], ["a", "b"], "c gone from b's view", timeout=TTL_S + 20)
        self.assertGreater(time.monotonic() - killed, 0.5, "c left before its lease could expire")
        self.assertIsNotNone(self.nodes["a"].wait_for_log("cluster: node 'c' left", timeout=10))
        self.infer(self.nodes["a"])

    def test_a_stopped_node_leaves_at_once(self):  # and the console's cluster page shows both before
        # A lease of 60 s: seeing b leave within 20 s shows it revoked its lease on SIGTERM.
        self.start_node("a", ttl=60)
        self.start_node("b", ttl=60)
        self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        # The web console's cluster page lists both (docs/console.md).
        r = suite_console.browse(self, self.nodes["a"], "pages", pages=[["cluster", "#/cluster", "#cluster-table"]])
        self.assertEqual(r["errors"], [])
        self.assertIn("a (this node)", r["pages"]["cluster"])
        self.assertIn("registry reachable", r["pages"]["cluster"])
        self.assertEqual(r["pages"]["cluster"].count("alive"), 2)
        self.assertEqual(self.nodes["b"].stop(), 0)
        self.wait_view(self.nodes["a"], ["a"], "b gone at once", timeout=20)
        self.assertIsNotNone(self.nodes["b"].wait_for_log("left (lease revoked)", timeout=1))

    def test_etcd_down_nodes_serve_by_their_last_view_and_recover_then_a_restarted_node_rejoins(self):
        self.etcd_down_nodes_serve_by_their_last_view_and_recover()
        self.a_restarted_node_rejoins()

    def etcd_down_nodes_serve_by_their_last_view_and_recover(self):
        self.start_node("a")
        self.start_node("b")
        self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        self.etcd.stop()
        s = self.wait_view(self.nodes["a"], ["a", "b"], "a's view marked stale", reachable=False)
        self.assertFalse(s["store_reachable"])
        self.infer(self.nodes["a"])
        self.infer(self.nodes["b"])
        self.assertEqual(C.metric(self.nodes["a"].metrics(), "inferd_cluster_store_reachable"), 0)
        self.assertGreater(C.metric(self.nodes["a"].metrics(), "inferd_cluster_store_errors_total"), 0)
        # Down longer than the lease: when etcd is back (with its data), the leases are gone or renewed, and
        # either way both nodes are registered again from what they hold.
        self.etcd.start()
        self.wait_view(self.nodes["a"], ["a", "b"], "both nodes back in a's view")
        self.wait_view(self.nodes["b"], ["a", "b"], "both nodes back in b's view")
        self.infer(self.nodes["a"])

    def test_etcd_restarted_without_its_data_gets_the_registry_back(self):
        self.start_node("a")
        self.start_node("b")
        self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        self.etcd.wipe()
        # Each node finds its lease gone and registers again (an event: its count of leases taken goes to 2);
        # only then does a view of both nodes come from the new etcd (not from before the wipe).
        for name in ("a", "b"):
            C.wait_until(self, name + " registered again",
                         lambda: C.metric(self.nodes[name].metrics(), "inferd_cluster_registrations_total") == 2)
        s = self.wait_view(self.nodes["a"], ["a", "b"], "the registry rebuilt")
        self.assertEqual(s["models_by_copies"], {"2": 2})
        keys = self.etcd.get_prefix("/inferd/default/nodes/")
        self.assertEqual(sorted(keys), ["/inferd/default/nodes/a", "/inferd/default/nodes/b"])
        self.assertIsNotNone(self.nodes["a"].wait_for_log("lost its lease", timeout=10))

    def a_restarted_node_rejoins(self):
        s = self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        started = {n["id"]: n["started_unix_ms"] for n in s["nodes"]}
        self.nodes["b"].proc.send_signal(signal.SIGKILL)
        self.nodes["b"].proc.wait(timeout=60)
        self.start_node("b")
        deadline = time.monotonic() + 30
        while True:
            s = self.wait_view(self.nodes["a"], ["a", "b"], "b back")
            now = {n["id"]: n["started_unix_ms"] for n in s["nodes"]}
            if now["b"] != started["b"]:
                break
            self.assertLess(time.monotonic(), deadline, "b's new process never showed in a's view")
        self.assertEqual(now["a"], started["a"])
        self.infer(self.nodes["b"])

    def test_the_cluster_route_needs_the_admin_token(self):
        token = os.path.join(self.dir, "token")
        with open(token, "w") as f:
            f.write("s3cret\n")
        node = self.start_node("a", "--admin-token-file", token)
        st, _, _ = node.request("GET", "/v2/cluster")
        self.assertEqual(st, 401)
        st, _, _ = node.request("GET", "/v2/cluster", headers={"Authorization": "Bearer wrong"})
        self.assertEqual(st, 401)
        self.wait_view_with_token(node, token)
        url = "http://127.0.0.1:%d" % node.port
        out = subprocess.run([C.ARGS.inferd, "cluster", "status", "--url", url], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("HTTP 401", out.stdout)
        out = subprocess.run([C.ARGS.inferd, "cluster", "status", "--url", url, "--admin-token-file", token, "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertEqual(json.loads(out.stdout)["self"], "a")
        self.infer(node)  # inference needs no token (only management routes do)

    def test_a_model_that_cannot_load_on_a_node_is_not_placed_there_again(self):
        # `feat` reads its input from Redis connection `online`: only a's jobs config has it, so the model loads on
        # a and fails on b. a places it, asks b for the second copy; b cannot hold it and declines, for good.
        self.repo = C.served_repository("cluster_declined", ["mlp"])
        C.copy_model(self.repo, "feat", {"features.connection": "online", "features.key_parameter": "user_id",
                                         "features.key_prefix": "user:", "features.input": "x",
                                         "features.names": ",".join("f%d" % i for i in range(8))})
        jobs = os.path.join(self.dir, "jobs.json")
        with open(jobs, "w") as f:
            json.dump({"connections": {"online": {"type": "redis", "port": etcd_server.free_port()}}}, f)
        self.start_node("a", "--jobs-config", jobs)
        self.start_node("b")
        self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        deadline = time.monotonic() + 30
        while placement_of(self.etcd, "feat") != {"nodes": ["a"], "declined": ["b"]}:
            self.assertLess(time.monotonic(), deadline, "feat never declined by b: %s" % placement_of(self.etcd, "feat"))
        placed = C.metric(self.nodes["a"].metrics(), "inferd_cluster_placements_total")
        rounds = C.metric(self.nodes["a"].metrics(), "inferd_cluster_rounds_total")
        C.wait_until(self, "five more rounds on a",
                     lambda: C.metric(self.nodes["a"].metrics(), "inferd_cluster_rounds_total") >= rounds + 5)
        self.assertEqual(C.metric(self.nodes["a"].metrics(), "inferd_cluster_placements_total"), placed,
                         "no placement loop")
        self.assertEqual(placement_of(self.etcd, "feat"), {"nodes": ["a"], "declined": ["b"]})

    def test_a_single_node_has_no_cluster_route(self):
        node = ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", os.path.join(self.dir, "single"))
        self.nodes["single"] = node
        st, _, body = node.request("GET", "/v2/cluster")
        self.assertEqual(st, 400, body)
        self.assertIn("not in a cluster", json.loads(body)["error"])
        self.assertNotIn("inferd_cluster_nodes", node.metrics())

    def test_bad_cluster_flags_exit_2_with_the_reason(self):
        cases = [
            (["--cluster", "http://127.0.0.1:2379"], "only etcd is supported"),
            (["--cluster", "etcd://127.0.0.1"], "expected HOST:PORT"),
            (["--cluster", "etcd://127.0.0.1:70000"], "the port must be 1..65535"),
            (["--cluster", self.etcd.url, "--cluster-node-id", "a b"], "--cluster-node-id"),
            (["--cluster", self.etcd.url, "--cluster-node-id", "a", "--cluster-lease-ttl-secs", "3",
              "--cluster-refresh-ms", "2000"], "a third of the lease TTL"),
            (["--cluster", self.etcd.url, "--cluster-name", "a/b", "--cluster-node-id", "a"], "--cluster-name"),
            (["--cluster", self.etcd.url, "--cluster-lease-ttl-secs", "1"], "--cluster-lease-ttl-secs"),
            (["--cluster", self.etcd.url], "needs --cluster-node-id"),  # --http-port 0 without an id
        ]
        for args, why in cases:
            p = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", self.repo, "--http-port", "0",
                                "--metrics-port", "0", "--grpc-port", "0", "--host", "127.0.0.1",
                                "--control-state-dir", os.path.join(self.dir, "bad"), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            self.assertEqual(p.returncode, 2, "%s: %s" % (args, p.stdout))
            self.assertIn(why, p.stdout, args)



def placement_of(etcd, model):
    """The placement etcd holds for `model` ({} when none)."""
    value = etcd.get_prefix("/inferd/default/placement/" + model).get("/inferd/default/placement/" + model)
    return json.loads(value) if value else {}


def placement(etcd, model):
    """The nodes etcd says `model` is placed on ([] when it has no placement)."""
    return placement_of(etcd, model).get("nodes", [])


def held_by(etcd):
    """{node id: [models it holds]} from the node records in etcd."""
    return {k.rsplit("/", 1)[1]: json.loads(v)["models"] for k, v in etcd.get_prefix("/inferd/default/nodes/").items()}


class ClusterRouting(ClusterBase):
    """Under on-demand residency: placement, forwarding (HTTP JSON and binary, TF Serving, gRPC ModelInfer and
    ModelStreamInfer, HTTP streams), failover after kill -9 and re-replication, copies by request rate (added and
    released), and eviction under a memory budget across nodes (a copy whose home is elsewhere goes first)."""

    node_flags = ()  # a test's flags for every node it starts

    def start_node(self, name, *extra, ttl=TTL_S, copy_rate=1000):
        # Copies by request rate only where a test asks for them (a burst of test requests could add one); the
        # rates are still measured and published above half of it.
        return ClusterBase.start_node(self, name, "--model-residency", "on-demand", "--cluster-copy-rate",
                                      str(copy_rate), *self.node_flags, *extra, ttl=ttl)

    def three_nodes_with_mlp_on_two(self):
        """a, b and c; mlp used once through a: placed on a (the first choice: most room, fewest models, then the
        smallest id), then its second copy on b. Returns the input sent."""
        for name in ("a", "b", "c"):
            self.start_node(name)
        self.wait_view(self.nodes["a"], ["a", "b", "c"], "three nodes")
        self.wait_view(self.nodes["c"], ["a", "b", "c"], "three nodes in c's view")
        self.infer(self.nodes["a"])
        self.wait_for(lambda: sorted(placement(self.etcd, "mlp")) == ["a", "b"], "mlp placed on a and b")
        self.wait_for(lambda: "mlp" in held_by(self.etcd).get("b", []), "b holding its copy of mlp")

        def c_sees_both_copies():
            counts = {n["id"]: n["models"] for n in self.status(self.nodes["c"])["nodes"]}
            return counts.get("a", 0) >= 1 and counts.get("b", 0) >= 1
        self.wait_for(c_sees_both_copies, "c seeing both copies")

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not predicate():
            self.assertLess(time.monotonic(), deadline, "timed out waiting for " + what)

    def test_a_forwarded_request_is_one_trace_across_the_nodes(self):
        # Every node traces only what its caller sampled (rate=0) and exports to the test's receiver.
        receiver = otlp_receiver.Receiver(otlp_receiver.otlp_messages(
            C.ROOT, os.path.join(C.ARGS.workdir, "otlp_stubs", str(os.getpid()))))
        self.addCleanup(receiver.stop)
        self.node_flags = ("--trace-config", "mode=opentelemetry", "--trace-config", "rate=0",
                           "--trace-config", "opentelemetry,url=" + receiver.url,
                           "--trace-config", "opentelemetry,bsp_schedule_delay=50")
        self.three_nodes_with_mlp_on_two()
        trace_id, caller = "a1" * 16, "b2" * 8
        x = np.ones((1, 8), np.float32)
        st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer",
                                                 json.dumps(ic.v2_json_request({"x": x})).encode(),
                                                 {"traceparent": "00-%s-%s-01" % (trace_id, caller)})
        self.assertEqual(st, 200, data)
        holder = hdrs.get("inferd-served-by")
        self.assertIn(holder, ("a", "b"), hdrs)
        # The answer names c's span (the peer's header is not relayed over it).
        self.assertEqual(hdrs["traceparent"].split("-")[1], trace_id)

        def done(spans):
            return len([s for s in spans if s["name"] == "InferRequest"]) == 2 and any(
                s["name"] == "mlp" for s in spans)
        spans = receiver.trace(trace_id, done)
        roots = {s["parent"]: s for s in spans if s["name"] == "InferRequest"}
        c_root = roots[caller]
        self.assertEqual(hdrs["traceparent"].split("-")[2], c_root["span_id"])
        forward = next(s for s in spans if s["name"] == "forward")
        self.assertEqual((forward["parent"], forward["kind"]), (c_root["span_id"], 3))  # CLIENT
        # The holder continued the trace under c's forward span, and ran the model there.
        h_root = roots[forward["span_id"]]
        model = next(s for s in spans if s["name"] == "mlp")
        self.assertEqual(model["parent"], h_root["span_id"])
        self.assertTrue(any(s["name"] == "compute" and s["parent"] == model["span_id"] for s in spans))

    def test_nodes_forward_to_each_other_over_mutual_tls(self):
        # Every port speaks TLS and wants a client certificate of the test CA; each node shows its own (server and
        # client use) to the peers it forwards to. The test is a client with a certificate of that CA.
        pem = tls_fixtures.make(os.path.join(C.ARGS.workdir, "tls"))
        self.ssl_context = ssl.create_default_context(cafile=pem["ca"])
        self.ssl_context.load_cert_chain(pem["client"], pem["client_key"])
        self.node_flags = ("--tls-cert-file", pem["node"], "--tls-key-file", pem["node_key"],
                           "--tls-client-ca-file", pem["ca"])
        self.three_nodes_with_mlp_on_two()
        self.assertIn("cluster forwarding over TLS (HTTP): peers' certificates checked against " + pem["ca"],
                      "".join(self.nodes["c"].log))
        # HTTPS through c, which holds nothing: forwarded to a holder over TLS (its ports take nothing else).
        x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
        st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer",
                                                 json.dumps(ic.v2_json_request({"x": x})).encode(),
                                                 {"Content-Type": "application/json"})
        self.assertEqual(st, 200, data)
        self.assertIn(hdrs.get("inferd-served-by"), ("a", "b"), hdrs)
        y = np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(2, -1)
        C.assert_matches_torch(y, C.torch_ref("mlp", x))
        # gRPC over TLS through c: forwarded over the holder's TLS gRPC port.
        r = lambda k: open(pem[k], "rb").read()  # noqa: E731
        creds = grpc.ssl_channel_credentials(r("ca"), r("client_key"), r("client"))
        pb = C.stubs().pb
        with grpc.secure_channel("127.0.0.1:%d" % self.nodes["c"].grpc_port, creds) as ch:
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            resp, call = stub.ModelInfer.with_call(gc.infer_request(pb, "mlp", {"x": x}, id="t1"), timeout=60)
        self.assertIn(dict(call.initial_metadata()).get("inferd-served-by"), ("a", "b"))
        C.assert_matches_torch(gc.outputs_of(resp)["y"].reshape(2, -1), C.torch_ref("mlp", x))
        metrics = self.nodes["c"].metrics()
        self.assertEqual(C.metric(metrics, "inferd_cluster_forwarded_requests_total"), 2)
        self.assertEqual(C.metric(metrics, "inferd_cluster_forward_failures_total"), 0)
        self.assertEqual(held_by(self.etcd)["c"], [], "c forwarded; it never loaded mlp")

    def test_first_use_places_the_model_then_a_second_copy_and_other_nodes_forward(self):
        self.three_nodes_with_mlp_on_two()
        self.assertEqual(held_by(self.etcd)["c"], [])
        self.placements_are_read_by_their_changes(self.nodes["c"])
        # Through c, which holds nothing: forwarded to a holder, the answer relayed unchanged.
        x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
        st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer",
                                                 json.dumps(ic.v2_json_request({"x": x})).encode(),
                                                 {"Content-Type": "application/json"})
        self.assertEqual(st, 200, data)
        self.assertIn(hdrs.get("inferd-served-by"), ("a", "b"), hdrs)
        self.assertEqual(hdrs.get("inferd-model-version"), "1", hdrs)
        y = np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(3, -1)
        C.assert_matches_torch(y, C.torch_ref("mlp", x))
        # The binary extension (its header length relayed) and TF Serving's :predict, both through c.
        body, hlen = ic.v2_binary_request({"x": x})
        st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer", body,
                                                 {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data)
        self.assertIn("inference-header-content-length", hdrs)
        _, outs = ic.decode_v2_response(hdrs, data)
        C.assert_matches_torch(np.asarray(list(outs.values())[0]).reshape(3, -1), C.torch_ref("mlp", x))
        st, js = self.nodes["c"].post_json("/v1/models/mlp:predict", {"instances": x.tolist()})
        self.assertEqual(st, 200, js)
        C.assert_matches_torch(np.array(js["predictions"], np.float32).reshape(3, -1), C.torch_ref("mlp", x))
        metrics = self.nodes["c"].metrics()
        self.assertEqual(C.metric(metrics, "inferd_cluster_forwarded_requests_total"), 3)
        self.assertEqual(C.metric(metrics, "inferd_cluster_forward_failures_total"), 0)
        self.assertEqual(held_by(self.etcd)["c"], [], "c forwarded; it never loaded mlp")
        # An unknown model is answered by the node asked (404), not forwarded.
        st, js = self.nodes["c"].post_json("/v2/models/nope/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 404, js)
        self.assertEqual(C.metric(self.nodes["c"].metrics(), "inferd_cluster_forwarded_requests_total"), 3)
        self.model_reads_through_c_are_forwarded()  # 7 more forwards
        self.grpc_requests_through_c_are_forwarded(x)  # 9 more; the last request makes c load mlp
        # A request a peer forwarded is served where it arrives, never forwarded again (one bounce at most).
        st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer",
                                                 json.dumps(ic.v2_json_request({"x": x})).encode(),
                                                 {"Content-Type": "application/json", "Inferd-Forwarded-By": "a"})
        self.assertEqual(st, 200, data)
        self.assertNotIn("inferd-served-by", hdrs)
        self.assertEqual(C.metric(self.nodes["c"].metrics(), "inferd_cluster_forwarded_requests_total"), 19)

    def placements_are_read_by_their_changes(self, node):
        """etcd's Range with min_mod_revision: with no placement changing, a node's rounds read no placement
        (only a full read would, one every 30 s: at most one here)."""
        def counters():
            m = node.metrics()
            return [C.metric(m, "inferd_cluster_" + n) for n in ("rounds_total", "placement_keys_read_total",
                                                                  "placement_full_reads_total")]
        rounds, keys, full = counters()
        self.assertGreaterEqual(keys, 1, "mlp's placement was read")
        self.wait_for(lambda: counters()[0] >= rounds + 5, "five more rounds")
        rounds2, keys2, full2 = counters()
        self.assertLessEqual(full2 - full, 1)
        self.assertEqual(keys2 - keys, full2 - full, "only a full read read mlp's placement again")

    def model_reads_through_c_are_forwarded(self):
        """Metadata, config and statistics over HTTP (KServe v2, TF Serving) through c (holds no copy): answered by
        a holder, relayed (its errors too); c never loads mlp for them (Triton's clients read metadata first)."""
        c = self.nodes["c"]
        served = {}
        for path in ("/v2/models/mlp", "/v2/models/mlp/versions/1", "/v2/models/mlp/config", "/v2/models/mlp/stats",
                     "/v1/models/mlp/metadata", "/v1/models/mlp"):
            st, hdrs, data = c.request("GET", path)
            self.assertEqual(st, 200, (path, data))
            self.assertIn(hdrs.get("inferd-served-by"), ("a", "b"), (path, hdrs))
            served[path] = (hdrs["inferd-served-by"], json.loads(data))
        md = served["/v2/models/mlp"][1]
        self.assertEqual((md["name"], md["versions"], md["inputs"][0]["name"]), ("mlp", ["1"], "x"), md)
        self.assertEqual(served["/v2/models/mlp/config"][1]["name"], "mlp")
        self.assertEqual(served["/v1/models/mlp"][1]["model_version_status"][0]["state"], "AVAILABLE")
        self.assertIn("signature_def", served["/v1/models/mlp/metadata"][1]["metadata"])
        # The statistics are the holder's own: the same as asked there directly.
        holder, stats = served["/v2/models/mlp/stats"]
        _, direct = self.nodes[holder].get_json("/v2/models/mlp/stats")
        self.assertEqual(stats["model_stats"][0]["inference_count"], direct["model_stats"][0]["inference_count"])
        self.assertGreaterEqual(sum(self.nodes[h].get_json("/v2/models/mlp/stats")[1]["model_stats"][0]
                                    ["inference_count"] for h in ("a", "b")), 4, "the inferences above")
        # The holder's error is relayed: a version mlp does not have.
        st, hdrs, data = c.request("GET", "/v2/models/mlp/versions/7/config")
        self.assertEqual(st, 404, data)
        self.assertIn(hdrs.get("inferd-served-by"), ("a", "b"), hdrs)
        # Readiness is answered by c itself (it can route to mlp), not forwarded.
        st, hdrs, _ = c.request("GET", "/v2/models/mlp/ready")
        self.assertEqual(st, 200)
        self.assertNotIn("inferd-served-by", hdrs)
        self.assertEqual(C.metric(c.metrics(), "inferd_cluster_forwarded_requests_total"), 10)
        self.assertEqual(held_by(self.etcd)["c"], [], "c forwarded the reads; it never loaded mlp")

    def grpc_requests_through_c_are_forwarded(self, x):
        """ModelInfer and ModelStreamInfer through c (holds no copy): forwarded over gRPC, the holder's answers
        relayed (its errors too); a request a peer forwarded is served where it arrives."""
        pb = C.stubs().pb
        with grpc.insecure_channel("127.0.0.1:%d" % self.nodes["c"].grpc_port) as ch:
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            resp, call = stub.ModelInfer.with_call(gc.infer_request(pb, "mlp", {"x": x}, id="u1"), timeout=60)
            self.assertIn(dict(call.initial_metadata()).get("inferd-served-by"), ("a", "b"))
            self.assertEqual(resp.id, "u1")
            C.assert_matches_torch(gc.outputs_of(resp)["y"].reshape(3, -1), C.torch_ref("mlp", x))
            # The holder's own error (the input's shape is checked where the model is), code and message relayed.
            bad = np.zeros((2, 5), np.float32)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.ModelInfer(gc.infer_request(pb, "mlp", {"x": bad}), timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, cm.exception.details())
            self.assertIn("shape", cm.exception.details())
            # A stream: each request forwarded on a stream of its own, the answers relayed in the stream.
            xs = [np.random.default_rng(10 + k).standard_normal((1, 8)).astype(np.float32) for k in range(3)]
            reqs = [gc.infer_request(pb, "mlp", {"x": v}, id=str(k), params={"triton_enable_empty_final_response":
                                                                             True})
                    for k, v in enumerate(xs)]
            got = {}
            for r in stub.ModelStreamInfer(iter(reqs), timeout=60):
                self.assertEqual(r.error_message, "")
                self.assertTrue(r.infer_response.parameters["triton_final_response"].bool_param)
                got[r.infer_response.id] = gc.outputs_of(r.infer_response)["y"]
            self.assertEqual(sorted(got), ["0", "1", "2"])
            for k, v in enumerate(xs):
                C.assert_matches_torch(got[str(k)].reshape(1, -1), C.torch_ref("mlp", v))
            # ModelMetadata, ModelConfig and ModelStatistics: answered by a holder too (its errors relayed).
            md, call = stub.ModelMetadata.with_call(pb.ModelMetadataRequest(name="mlp"), timeout=60)
            self.assertIn(dict(call.initial_metadata()).get("inferd-served-by"), ("a", "b"))
            self.assertEqual((md.name, list(md.versions), md.inputs[0].name), ("mlp", ["1"], "x"))
            cfg, call = stub.ModelConfig.with_call(pb.ModelConfigRequest(name="mlp"), timeout=60)
            self.assertIn(dict(call.initial_metadata()).get("inferd-served-by"), ("a", "b"))
            self.assertEqual(cfg.config.name, "mlp")
            stats, call = stub.ModelStatistics.with_call(pb.ModelStatisticsRequest(name="mlp"), timeout=60)
            self.assertIn(dict(call.initial_metadata()).get("inferd-served-by"), ("a", "b"))
            self.assertEqual(stats.model_stats[0].name, "mlp")
            with self.assertRaises(grpc.RpcError) as cm:
                stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp", version="7"), timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND, cm.exception.details())
            metrics = self.nodes["c"].metrics()
            self.assertEqual(C.metric(metrics, "inferd_cluster_forwarded_requests_total"), 19)
            self.assertEqual(C.metric(metrics, "inferd_cluster_forward_failures_total"), 0)
            self.assertEqual(held_by(self.etcd)["c"], [])
            # Marked as forwarded by a peer: served here (c loads mlp), not forwarded again.
            resp, call = stub.ModelInfer.with_call(gc.infer_request(pb, "mlp", {"x": x}), timeout=60,
                                                   metadata=(("inferd-forwarded-by", "a"),))
            self.assertNotIn("inferd-served-by", dict(call.initial_metadata()))
            C.assert_matches_torch(gc.outputs_of(resp)["y"].reshape(3, -1), C.torch_ref("mlp", x))
            self.assertEqual(C.metric(self.nodes["c"].metrics(), "inferd_cluster_forwarded_requests_total"), 19)

    def test_streams_are_relayed_as_they_come(self):
        self.three_nodes_with_mlp_on_two()
        ref = llm_fixtures.Reference(C.REPO)
        prompt = "The GNU General Public License"
        ids = ref.prompt_ids(prompt)
        want = ref.text(ids, ref.greedy(ids, 16)[0])
        # tiny_chat's first use, a metadata request through b (as Triton's clients begin), goes to the node with
        # the fewest models, c, which loads and places it, then a second copy; a stream through the node that holds
        # no copy is relayed from a holder.
        st, hdrs, data = self.nodes["b"].request("GET", "/v2/models/tiny_chat")
        self.assertEqual(st, 200, data)
        self.assertEqual(hdrs.get("inferd-served-by"), "c", hdrs)
        self.assertEqual(json.loads(data)["name"], "tiny_chat")
        self.wait_for(lambda: placement(self.etcd, "tiny_chat")[:1] == ["c"], "tiny_chat placed on c", timeout=60)
        body = json.dumps({"text_input": prompt, "parameters": {"max_tokens": 16, "temperature": 0}}).encode()
        st, hdrs, data = self.nodes["b"].request("POST", "/v2/models/tiny_chat/generate", body)
        self.assertEqual(st, 200, data)
        self.assertIn(hdrs.get("inferd-served-by"), placement(self.etcd, "tiny_chat") + [None], hdrs)
        self.assertEqual(json.loads(data)["text_output"], want)
        self.wait_for(lambda: len(placement(self.etcd, "tiny_chat")) == 2, "tiny_chat's second copy", timeout=60)
        holders = placement(self.etcd, "tiny_chat")
        self.wait_for(lambda: all("tiny_chat" in held_by(self.etcd).get(h, []) for h in holders),
                      "both copies of tiny_chat loaded", timeout=60)
        via = next(n for n in ("a", "b", "c") if n not in holders)

        def via_sees_holders():
            counts = {n["id"]: n["models"] for n in self.status(self.nodes[via])["nodes"]}
            held = held_by(self.etcd)
            return all(counts.get(h, 0) == len(held[h]) for h in holders)
        self.wait_for(via_sees_holders, via + " seeing both copies")
        conn = http.client.HTTPConnection("127.0.0.1", self.nodes[via].port, timeout=120)
        conn.request("POST", "/v2/models/tiny_chat/generate_stream", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        self.assertIn("text/event-stream", r.getheader("content-type"))
        self.assertIn(r.getheader("inferd-served-by"), holders)
        events = [json.loads(e[len("data: "):]) for e in r.read().decode().split("\n\n") if e.strip()]
        conn.close()
        self.assertGreater(len(events), 3, "streamed in parts")
        self.assertEqual("".join(e["text_output"] for e in events), want)
        # OpenAI's streamed completion, through the same node.
        st, hdrs, data = self.nodes[via].request(
            "POST", "/v1/completions",
            json.dumps({"model": "tiny_chat", "prompt": prompt, "max_tokens": 16, "temperature": 0,
                        "stream": True}).encode(), {"Content-Type": "application/json"})
        self.assertEqual(st, 200, data)
        chunks = [e[len("data: "):] for e in data.decode().split("\n\n") if e.strip()]
        self.assertEqual(chunks[-1], "[DONE]")
        self.assertEqual("".join(json.loads(c)["choices"][0]["text"] for c in chunks[:-1]), want)
        # Through b: the metadata, the first generate, the stream and the completion (when b holds no copy).
        forwarded_by_b_before = 2 if via == "b" else 0
        self.assertEqual(C.metric(self.nodes[via].metrics(), "inferd_cluster_forwarded_requests_total"),
                         forwarded_by_b_before + 2)

    def test_a_killed_holder_is_routed_around_at_once_and_its_copy_replaced(self):
        self.three_nodes_with_mlp_on_two()
        x = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
        body = json.dumps(ic.v2_json_request({"x": x})).encode()
        ref = C.torch_ref("mlp", x)

        def through_c():
            st, hdrs, data = self.nodes["c"].request("POST", "/v2/models/mlp/infer", body,
                                                     {"Content-Type": "application/json"})
            self.assertEqual(st, 200, data)  # never a failed request
            C.assert_matches_torch(np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(1, -1), ref)
            return hdrs.get("inferd-served-by")
        served = {through_c() for _ in range(6)}
        self.assertTrue(served <= {"a", "b"}, served)
        self.nodes["a"].proc.send_signal(signal.SIGKILL)
        self.nodes["a"].proc.wait(timeout=60)
        # At once (a's lease has not expired): c's forwards to a fail, a is marked down, b answers.
        for _ in range(10):
            self.assertIn(through_c(), ("b", None))
        # After a's lease expires, b (now mlp's first live node) places a new copy: on c, the only other node.
        self.wait_for(lambda: sorted(placement(self.etcd, "mlp")) == ["b", "c"], "mlp re-replicated to b and c",
                      timeout=TTL_S + 30)
        self.wait_for(lambda: "mlp" in held_by(self.etcd).get("c", []), "c holding its new copy")
        self.assertGreaterEqual(C.metric(self.nodes["b"].metrics(), "inferd_cluster_re_replications_total"), 1)
        self.assertIsNone(through_c(), "c holds mlp now: served there")


    def test_a_busy_model_gets_more_copies_then_gives_the_extra_one_up(self):
        # At 5 requests/s per copy, mlp served at ~100/s gets a copy on every node; once the traffic stops, the
        # newest copy is released (two stay: mlp was used) and its node evicts it.
        for name in ("a", "b", "c"):
            self.start_node(name, copy_rate=5)
        self.wait_view(self.nodes["a"], ["a", "b", "c"], "three nodes")
        self.infer(self.nodes["a"])
        self.wait_for(lambda: sorted(placement(self.etcd, "mlp")) == ["a", "b"], "mlp placed on a and b")
        # The traffic goes on until c holds its copy (stopped sooner, the copy could be released while it loads).
        deadline = time.monotonic() + 60
        while not (len(placement(self.etcd, "mlp")) == 3 and "mlp" in held_by(self.etcd).get("c", [])):
            for _ in range(20):
                self.infer(self.nodes["a"])  # a holds mlp: served there, counted in a's published rate
            self.assertLess(time.monotonic(), deadline,
                            "mlp never got a third copy on c: %s, held %s" % (placement_of(self.etcd, "mlp"),
                                                                              held_by(self.etcd)))
        self.assertEqual(placement(self.etcd, "mlp"), ["a", "b", "c"])
        self.assertGreaterEqual(C.metric(self.nodes["a"].metrics(), "inferd_cluster_rate_copies_total"), 1)
        # No more traffic: the rate falls to 0; c's copy is released, c evicts it, and the placement forgets it.
        self.wait_for(lambda: placement_of(self.etcd, "mlp") == {"nodes": ["a", "b"]},
                      "mlp back to two copies with nothing released", timeout=60)
        self.assertEqual(held_by(self.etcd)["c"], [])
        self.assertEqual(C.metric(self.nodes["c"].metrics(), "inferd_cluster_released_copies_total"), 1)
        self.infer(self.nodes["c"])  # c forwards again


    def test_under_a_memory_budget_a_node_evicts_the_copy_whose_home_is_elsewhere(self):
        # m1, m2, m3: mlp with a declared size of 100 KiB each; two nodes with room for two. m1's home is a, m2's
        # is b, and each node holds a copy of the other's. When m3 comes, each must evict one. By recency alone each
        # would evict its own home's model (used least recently there); but a model another live node holds, and
        # whose home is not this node, is the cheaper victim: a evicts m2, b evicts m1, the homes keep theirs.
        self.repo = os.path.join(self.dir, "repository")
        mlp = os.path.join(C.REPO, "mlp")
        with open(os.path.join(mlp, "config.pbtxt")) as f:
            config = f.read()
        for m in ("m1", "m2", "m3"):
            os.makedirs(os.path.join(self.repo, m, "1"))
            os.symlink(os.path.abspath(os.path.join(mlp, "1", "model.pt")), os.path.join(self.repo, m, "1", "model.pt"))
            with open(os.path.join(self.repo, m, "config.pbtxt"), "w") as f:
                f.write(config + '\nparameters: { key: "memory_bytes" value: { string_value: "100KiB" } }\n')
        for name in ("a", "b"):
            self.start_node(name, "--memory-budget", "250KiB", "--model-min-residency-secs", "0")
        self.wait_view(self.nodes["a"], ["a", "b"], "two nodes")
        self.wait_view(self.nodes["b"], ["a", "b"], "two nodes in b's view")
        x = np.random.default_rng(4).standard_normal((1, 8)).astype(np.float32)

        def infer(node, model, here=False):
            # here: as if a peer had forwarded it, so it is served (and the model loaded) where it arrives.
            headers = {"Content-Type": "application/json"}
            if here:
                headers["Inferd-Forwarded-By"] = "test"
            st, _, data = self.nodes[node].request("POST", "/v2/models/%s/infer" % model,
                                                   json.dumps(ic.v2_json_request({"x": x})).encode(), headers)
            self.assertEqual(st, 200, data)
            y = np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(1, -1)
            C.assert_matches_torch(y, C.torch_ref("mlp", x))

        infer("a", "m1", here=True)
        infer("b", "m2", here=True)
        self.wait_for(lambda: held_by(self.etcd) == {"a": ["m1", "m2"], "b": ["m1", "m2"]}, "second copies")
        self.assertEqual(placement(self.etcd, "m1"), ["a", "b"])
        self.assertEqual(placement(self.etcd, "m2"), ["b", "a"])
        for node in ("a", "b"):  # the preference reads each node's view of the other's copies
            self.wait_for(lambda: [n["models"] for n in self.status(self.nodes[node])["nodes"]] == [2, 2],
                          node + " seeing two models on each node")
        infer("a", "m2")  # a holds a copy: served there, now a's most recently used model
        infer("b", "m1")
        infer("a", "m3", here=True)
        self.wait_for(lambda: all("m3" in v for v in held_by(self.etcd).values()), "m3 on both nodes")
        held = held_by(self.etcd)
        self.assertEqual(held, {"a": ["m1", "m3"], "b": ["m2", "m3"]},
                         "each node kept the model whose home it is and evicted its copy of the other's")
        for node in ("a", "b"):
            self.assertEqual(C.metric(self.nodes[node].metrics(), "inferd_model_evictions_total"), 1, node)
        # The evicted copies are served from their homes: through either node, every model answers.
        for node in ("a", "b"):
            for m in ("m1", "m2", "m3"):
                infer(node, m)

if __name__ == "__main__":
    unittest.main()
