"""Integration suite: LoRA adapters over a generative model (run by run_tests.py; docs/generative.md).

`tiny_chat` has two adapters in the repository (tiny_chat/loras/sql: q/v rank 4; poet: every projection, rank 8,
rsLoRA, FP16), and `tiny_chat_merged_<name>` is tiny_chat with that adapter merged into its weights (W + scale B A,
merged in python3-torch). Every greedy answer of an adapter is compared token for token with the float64 reference
on the merged weights and with the merged model served beside it, requests of different adapters and of the base
model running together; then the vLLM load/unload routes (admin token), bad adapters, the OpenAI SDK, metrics.
Stages: release and ASan (every parser on the way is exercised); nothing here is timing-dependent."""
import json
import os
import shutil
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import llm_fixtures  # noqa: E402

SERVER = None
TOKEN = "lora-admin-token"
ADMIN = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
REFS = {}
PROMPTS = ["The GNU General Public License", "Everyone is permitted to copy", "You may convey verbatim copies",
           "free software"]


def setUpModule():
    global SERVER
    C.REPO = os.path.join(C.ARGS.workdir, "repository")
    token_file = os.path.join(C.ARGS.workdir, "lora_admin_token")
    with open(token_file, "w") as f:
        f.write(TOKEN)
    SERVER = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_chat",
                       "--load-model", "tiny_chat_merged_sql", "--load-model", "tiny_chat_merged_poet",
                       "--admin-token-file", token_file)


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        assert rc == 0, "".join(SERVER.log[-30:])


def ref(lora):
    if lora not in REFS:
        REFS[lora] = llm_fixtures.Reference(C.REPO, lora=lora)
    return REFS[lora]


def expected(lora, prompt, max_tokens):
    r = ref(lora)
    ids = r.prompt_ids(prompt)
    out, finish = r.greedy(ids, max_tokens)
    return r.text(ids, out), finish


def complete(model, prompt, max_tokens=12, **extra):
    body = dict({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}, **extra)
    return SERVER.post_json("/v1/completions", body)


class Lora(unittest.TestCase):
    def test_models_lists_the_adapters_with_their_base(self):
        status, body = SERVER.get_json("/v1/models")
        self.assertEqual(status, 200)
        parents = {m["id"]: m["parent"] for m in body["data"]}
        self.assertEqual(parents.get("sql"), "tiny_chat")
        self.assertEqual(parents.get("poet"), "tiny_chat")
        self.assertIsNone(parents.get("tiny_chat", "missing"))

    def test_adapters_batched_together_equal_their_merged_models(self):
        # Every (model, prompt) at once, so adapters' and the base model's sequences share steps.
        jobs = [(m, p) for m in ("sql", "poet", "tiny_chat", "tiny_chat_merged_sql", "tiny_chat_merged_poet")
                for p in PROMPTS]
        results = {}

        def run(job):
            results[job] = complete(*job)
        threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        for (model, prompt), (status, body) in results.items():
            self.assertEqual(status, 200, (model, body))
        self.assertEqual(len(results), len(jobs))
        for prompt in PROMPTS:
            for lora in ("sql", "poet"):
                text, finish = expected(lora, prompt, 12)
                got = results[(lora, prompt)][1]
                self.assertEqual(got["model"], lora)
                self.assertEqual(got["choices"][0]["text"], text, (lora, prompt))
                self.assertEqual(got["choices"][0]["finish_reason"], finish)
                self.assertEqual(results[("tiny_chat_merged_" + lora, prompt)][1]["choices"][0]["text"], text)
            base_text, _ = expected(None, prompt, 12)
            self.assertEqual(results[("tiny_chat", prompt)][1]["choices"][0]["text"], base_text)
        # The adapters change the answers (else the comparison above proves little).
        self.assertNotEqual(expected("sql", PROMPTS[0], 12)[0], expected(None, PROMPTS[0], 12)[0])
        self.assertNotEqual(expected("poet", PROMPTS[0], 12)[0], expected(None, PROMPTS[0], 12)[0])

    def test_streamed_answer_and_the_generate_routes_name_adapters(self):
        text, _ = expected("poet", PROMPTS[1], 10)
        status, _, data = SERVER.request("POST", "/v1/completions", json.dumps(
            {"model": "poet", "prompt": PROMPTS[1], "max_tokens": 10, "temperature": 0, "stream": True}).encode(),
            {"Content-Type": "application/json"})
        self.assertEqual(status, 200)
        streamed = ""
        for line in data.decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                self.assertEqual(chunk["model"], "poet")
                streamed += chunk["choices"][0]["text"]
        self.assertEqual(streamed, text)
        # KServe's generate extension: the base model with parameter lora_adapter, or the adapter as the model.
        for path, params in (("/v2/models/tiny_chat/generate", {"lora_adapter": "poet"}),
                             ("/v2/models/poet/generate", {})):
            status, body = SERVER.post_json(path, {"text_input": PROMPTS[1], "parameters": dict(
                {"max_tokens": 10, "temperature": 0}, **params)})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["text_output"], text, path)

    def test_grpc_stream_names_the_adapter(self):
        import grpc
        s = C.stubs()
        text, _ = expected("sql", PROMPTS[3], 10)
        with grpc.insecure_channel("127.0.0.1:%d" % SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            reqs = [gc.infer_request(s.pb, model, {"text_input": ([1], [PROMPTS[3].encode()])}, id=model,
                                     params=dict({"max_tokens": 10, "temperature": 0.0}, **params))
                    for model, params in (("sql", {}), ("tiny_chat", {"lora_adapter": "sql"}))]
            got = {}
            for r in stub.ModelStreamInfer(iter(reqs), timeout=120):
                self.assertEqual(r.error_message, "")
                out = gc.outputs_of(r.infer_response)
                if "text_output" in out:
                    got[r.infer_response.id] = got.get(r.infer_response.id, b"") + out["text_output"][0]
        self.assertEqual(got["sql"].decode(), text)
        self.assertEqual(got["tiny_chat"].decode(), text)

    def test_prefix_cache_is_keyed_by_adapter(self):
        prompt = "Preamble. The licenses for most software are designed to take away your freedom. " * 4
        for model in ("tiny_chat", "sql"):
            status, body = complete(model, prompt, 4)
            self.assertEqual(status, 200, body)
        # sql's prompt matched no block of the base model's (its keys and values differ) ...
        self.assertEqual(body["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0), 0, body["usage"])
        status, again = complete("sql", prompt, 4)
        # ... and its own blocks the second time, with the same answer.
        self.assertGreater(again["usage"]["prompt_tokens_details"]["cached_tokens"], 16, again["usage"])
        self.assertEqual(again["choices"][0]["text"], body["choices"][0]["text"])

    def test_unknown_adapters_are_404_in_openais_shape(self):
        status, body = complete("no-such-adapter", "hi")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["message"], "The model `no-such-adapter` does not exist.")
        status, body = SERVER.post_json("/v2/models/tiny_chat/generate",
                                        {"text_input": "hi", "parameters": {"lora_adapter": "nope"}})
        self.assertEqual(status, 404, body)
        self.assertIn("no LoRA adapter 'nope'", body["error"])
        status, body = SERVER.post_json("/v2/models/sql/generate",
                                        {"text_input": "hi", "parameters": {"lora_adapter": "poet"}})
        self.assertEqual(status, 400, body)

    def test_load_and_unload_through_vllms_routes(self):
        d = os.path.join(C.ARGS.workdir, "api_loras", "late")
        shutil.rmtree(d, ignore_errors=True)
        llm_fixtures.write_adapter(d, "late")
        body = {"lora_name": "late", "lora_path": d, "base_model_name": "tiny_chat"}
        status, _, data = SERVER.request("POST", "/v1/load_lora_adapter", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        self.assertEqual(status, 401, data)  # the admin token's route
        status, hdrs, data = SERVER.request("POST", "/v1/load_lora_adapter", json.dumps(body).encode(), ADMIN)
        self.assertEqual(status, 200, data)
        self.assertEqual(data.decode(), "Success: LoRA adapter 'late' added successfully.")
        self.assertIn("late", {m["id"] for m in SERVER.get_json("/v1/models")[1]["data"]})
        status, got = complete("late", PROMPTS[2])
        self.assertEqual(status, 200, got)
        self.assertEqual(got["choices"][0]["text"], expected("late", PROMPTS[2], 12)[0])
        status, _, data = SERVER.request("POST", "/v1/load_lora_adapter", json.dumps(body).encode(), ADMIN)
        self.assertEqual(status, 409, data)
        self.assertIn("already been loaded", json.loads(data)["error"]["message"])
        status, _, data = SERVER.request("POST", "/v1/unload_lora_adapter", json.dumps({"lora_name": "late"}).encode(),
                                         ADMIN)
        self.assertEqual((status, data.decode()), (200, "Success: LoRA adapter 'late' removed successfully."))
        self.assertEqual(complete("late", "hi")[0], 404)
        status, _, data = SERVER.request("POST", "/v1/unload_lora_adapter", json.dumps({"lora_name": "late"}).encode(),
                                         ADMIN)
        self.assertEqual(status, 404, data)
        self.assertEqual(json.loads(data)["error"]["message"], "The lora adapter 'late' cannot be found.")

    def test_bad_adapters_fail_their_load_with_the_reason(self):
        root = os.path.join(C.ARGS.workdir, "bad_loras")
        shutil.rmtree(root, ignore_errors=True)
        good = os.path.join(root, "good")
        llm_fixtures.write_adapter(good, "sql")
        tensors = llm_fixtures.reference.read_safetensors(os.path.join(good, "adapter_model.safetensors"))
        config = json.load(open(os.path.join(good, "adapter_config.json")))

        def variant(name, config_change=None, tensors_change=None, raw_config=None):
            d = os.path.join(root, name)
            os.makedirs(d)
            t = dict(tensors)
            if tensors_change:
                tensors_change(t)
            llm_fixtures.reference.write_safetensors(os.path.join(d, "adapter_model.safetensors"), t, "F32")
            with open(os.path.join(d, "adapter_config.json"), "w") as f:
                f.write(raw_config if raw_config is not None else json.dumps(dict(config, **(config_change or {}))))
            return d
        q0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_"
        wide = dict(llm_fixtures.CONFIG, hidden_size=128)
        cases = {
            "rank": (variant("rank", {"r": 8}), "r 8"),
            "base": (variant("base", tensors_change=lambda t: t.update(
                {q0 + "A.weight": llm_fixtures.reference.torch.zeros(4, wide["hidden_size"])})), "another base model"),
            "missing": (variant("missing", tensors_change=lambda t: t.pop(q0 + "B.weight")), "lacks lora_B"),
            "module": (variant("module", {"target_modules": ["q_proj", "w_proj"]}), "w_proj"),
            "huge": (variant("huge", {"r": 100000}), "rank"),
            "json": (variant("json", raw_config="{not json"), "adapter_config.json"),
            "nofolder": (os.path.join(root, "nothing-here"), "no adapter_config.json"),
        }
        for name, (path, reason) in cases.items():
            status, _, data = SERVER.request("POST", "/v1/load_lora_adapter", json.dumps(
                {"lora_name": "bad-" + name, "lora_path": path, "base_model_name": "tiny_chat"}).encode(), ADMIN)
            self.assertIn(status, (400, 404), (name, data))
            message = json.loads(data)["error"]["message"]
            self.assertIn(reason, message, name)
            self.assertIn("bad-" + name, message)
        for body, status_want in (({"lora_name": "x"}, 400), ({"lora_path": good}, 400),
                                  ({"lora_name": "a/b", "lora_path": good, "base_model_name": "tiny_chat"}, 400),
                                  ({"lora_name": "tiny_chat", "lora_path": good}, 409),
                                  ({"lora_name": "y", "lora_path": good}, 400),  # which of 10 generative models?
                                  ({"lora_name": "y", "lora_path": good, "base_model_name": "nope"}, 404),
                                  ({"lora_name": "y", "lora_path": good, "base_model_name": "mlp"}, 400)):
            status, _, data = SERVER.request("POST", "/v1/load_lora_adapter", json.dumps(body).encode(), ADMIN)
            self.assertEqual(status, status_want, (body, data))
        status, _, data = SERVER.request("POST", "/v1/load_lora_adapter", b"[1,2", ADMIN)
        self.assertEqual(status, 400, data)
        # The server and the other adapters go on serving.
        self.assertEqual(complete("sql", PROMPTS[0])[1]["choices"][0]["text"], expected("sql", PROMPTS[0], 12)[0])

    def test_the_official_openai_sdk_names_an_adapter(self):
        sdk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_sdk")
        self.assertTrue(os.path.isdir(os.path.join(sdk, "node_modules", "openai")),
                        "the OpenAI SDK is missing: scripts/setup.sh installs it")
        question = "What is free software?"
        r = subprocess.run(["node", os.path.join(sdk, "lora_client.mjs"), "http://127.0.0.1:%d/v1" % SERVER.port, "sql",
                            question], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(got["models"]["sql"], "tiny_chat")
        self.assertEqual(got["model"], "sql")
        rf = ref("sql")
        ids = rf.chat_ids([{"role": "user", "content": question}])
        out, finish = rf.greedy(ids, 16, (2, rf.sp.piece_to_id("<|im_end|>")))
        self.assertEqual(got["text"], rf.text(ids, out))
        self.assertEqual(got["finish"], finish)
        self.assertEqual(got["not_found"]["status"], 404)

    def test_metrics_count_per_adapter(self):
        self.assertEqual(complete("sql", "metrics")[0], 200)
        m = SERVER.metrics()
        line = [x for x in m.splitlines() if x.startswith("vllm:lora_requests_info{") and 'model="tiny_chat"' in x]
        self.assertEqual(len(line), 1, m)
        self.assertIn('max_lora="16"', line[0])
        self.assertIn('running_lora_adapters=""', line[0])  # nothing runs now
        self.assertGreater(float(line[0].rsplit(" ", 1)[1]), 1.7e9, "the time of the last change")
        requests = [x for x in m.splitlines() if x.startswith("inferd_lora_requests_total{") and
                    'lora_adapter="sql"' in x]
        self.assertEqual(len(requests), 1, m)
        self.assertGreaterEqual(float(requests[0].rsplit(" ", 1)[1]), 1)
        loads = [x for x in m.splitlines() if x.startswith("inferd_lora_loads_total{") and 'lora_adapter="sql"' in x]
        self.assertEqual(float(loads[0].rsplit(" ", 1)[1]), 1)  # loaded once, kept since
        self.assertIn("inferd_lora_adapters_resident{", m)
