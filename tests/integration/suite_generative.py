"""Integration suite: generative models (run by run_tests.py).

`tiny_chat` (llm_fixtures.py) is a Llama-shaped decoder with random weights and a SentencePiece tokenizer; every
greedy answer is compared token for token with the independent float64 reference run here on the same weights,
through KServe's generate extension and the OpenAI-compatible routes, alone and under concurrency, with the KV
cache small enough to force preemption, with prefix caching off and with static batching."""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import llm_fixtures  # noqa: E402

REF = None
SERVER = None
PROMPTS = ["The GNU General Public License", "Everyone is permitted to copy", "0. Definitions.",
           "You may convey verbatim copies", "free software", "x", "This License", "Preamble"]


def setUpModule():
    global REF, SERVER
    C.REPO = os.path.join(C.ARGS.workdir, "repository")
    REF = llm_fixtures.Reference(C.REPO)
    SERVER = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_chat",
                       "--load-model", "tiny_chat_small_kv", "--load-model", "tiny_chat_static",
                       "--load-model", "tiny_chat_no_prefix", "--load-model", "tiny_chat_int8", "--load-model", "tiny_chat_bf16",
                       "--load-model", "tiny_chat_spec",
                       "--load-model", "mlp")


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        assert rc == 0, "".join(SERVER.log[-30:])


_expected = {}


def expected(prompt, max_tokens, chat=False):
    """(text, finish_reason, completion_tokens) greedy generation must give."""
    key = (prompt if not chat else json.dumps(prompt), max_tokens, chat)
    if key not in _expected:
        ids = REF.chat_ids(prompt) if chat else REF.prompt_ids(prompt)
        stops = (2, REF.sp.piece_to_id("<|im_end|>")) if chat else (2,)
        out, finish = REF.greedy(ids, max_tokens, stops)
        _expected[key] = (REF.text(ids, out), finish, len(out) + (1 if finish == "stop" else 0))
    return _expected[key]


def sse(body):
    """The data payloads of a server-sent event stream."""
    events = []
    for block in body.decode().split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            events.append(block[len("data: "):])
    return events


# Schemas of the structured-output tests: nested objects, arrays, enums, bounded numbers, patterns, refs, anyOf.
STRUCTURED_SCHEMAS = [
    {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "address": {"type": "object", "properties": {
            "city": {"enum": ["Paris", "Lyon", "Nice"]},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city", "zip"],
            "additionalProperties": False},
        "nickname": {"type": "string", "maxLength": 5},
        "score": {"type": "number", "minimum": 0, "maximum": 1}},
     "required": ["name", "age", "address", "score"], "additionalProperties": False},
    {"type": "object", "properties": {
        "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 9},
            "price": {"type": "number", "minimum": 0.5, "maximum": 100}}, "required": ["sku", "qty", "price"]}},
        "status": {"enum": ["new", "paid", "shipped"]},
        "express": {"type": "boolean"},
        "note": {"type": ["string", "null"], "maxLength": 6}},
     "required": ["items", "status", "express", "note"]},
    {"type": "array", "minItems": 2, "maxItems": 4, "items": {"type": "object", "properties": {
        "k": {"enum": ["x", "y", 3, None]},
        "v": {"type": "number", "minimum": -5, "exclusiveMaximum": 5}}, "required": ["k", "v"]}},
    {"anyOf": [{"type": "integer", "minimum": -20, "maximum": 20}, {"const": "none"}, {"type": "null"},
               {"$ref": "#/$defs/point"}],
     "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "exclusiveMinimum": 0},
                                                           "y": {"type": "integer", "maximum": 0}},
                         "required": ["x", "y"]}}},
    {"type": "object", "properties": {
        "when": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 4},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "ok": {"const": True}},
     "required": ["when", "tags", "level", "ok"]},
]


def post(path, obj, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=timeout)
    c.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def chat_stream_text(events):
    text, finish = "", None
    for e in events[:-1]:
        chunk = json.loads(e)
        for ch in chunk["choices"]:
            text += ch["delta"].get("content") or ""
            finish = ch["finish_reason"] or finish
    return text, finish


class Generative(unittest.TestCase):
    def test_generate_extension_matches_the_reference(self):
        for prompt in PROMPTS[:4]:
            status, hdrs, data = post("/v2/models/tiny_chat/generate",
                                      {"text_input": prompt, "parameters": {"max_tokens": 24, "temperature": 0}})
            self.assertEqual(status, 200, data)
            body = json.loads(data)
            self.assertEqual(body["text_output"], expected(prompt, 24)[0], prompt)
            self.assertEqual(body["model_name"], "tiny_chat")
            # Every inference answer names the version that served it (docs/rollout.md).
            self.assertEqual(hdrs.get("inferd-model-version"), "1", hdrs)

    def test_generate_stream_parts_add_up(self):
        status, hdrs, data = post("/v2/models/tiny_chat/generate_stream",
                                  {"text_input": PROMPTS[0], "parameters": {"max_tokens": 24, "temperature": 0}})
        self.assertEqual(status, 200)
        self.assertIn("text/event-stream", hdrs["content-type"])
        self.assertEqual(hdrs.get("inferd-model-version"), "1", hdrs)
        events = [json.loads(e) for e in sse(data)]
        self.assertGreater(len(events), 3)
        self.assertEqual("".join(e["text_output"] for e in events), expected(PROMPTS[0], 24)[0])

    def test_grpc_stream_infer_streams_tokens(self):
        import grpc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            reqs = [gc.infer_request(s.pb, "tiny_chat", {"text_input": ([1], [p.encode()])}, id=str(i),
                                     params={"max_tokens": 20, "temperature": 0.0,
                                             "triton_enable_empty_final_response": True})
                    for i, p in enumerate(PROMPTS[:3])]
            text, parts, finals = {}, {}, {}
            for r in stub.ModelStreamInfer(iter(reqs), timeout=120):
                self.assertEqual(r.error_message, "")
                rid = r.infer_response.id
                out = gc.outputs_of(r.infer_response)
                if "text_output" in out:
                    text[rid] = text.get(rid, b"") + out["text_output"][0]
                    parts[rid] = parts.get(rid, 0) + 1
                if r.infer_response.parameters["triton_final_response"].bool_param:
                    finals[rid] = r.infer_response.parameters["finish_reason"].string_param
        for i, p in enumerate(PROMPTS[:3]):
            want, finish, _ = expected(p, 20)
            self.assertEqual(text[str(i)].decode(), want, p)
            self.assertEqual(finals[str(i)], finish)
            self.assertGreater(parts[str(i)], 3)

    def test_completions_match_the_reference_with_usage(self):
        status, body = SERVER.post_json("/v1/completions", {"model": "tiny_chat", "prompt": PROMPTS[1], "max_tokens": 20,
                                                            "temperature": 0})
        self.assertEqual(status, 200, body)
        text, finish, n = expected(PROMPTS[1], 20)
        self.assertEqual(body["object"], "text_completion")
        self.assertTrue(body["id"].startswith("cmpl-"))
        self.assertEqual(body["choices"][0]["text"], text)
        self.assertEqual(body["choices"][0]["finish_reason"], finish)
        self.assertEqual(body["usage"]["prompt_tokens"], len(REF.prompt_ids(PROMPTS[1])))
        self.assertEqual(body["usage"]["completion_tokens"], n)
        self.assertEqual(body["usage"]["total_tokens"], body["usage"]["prompt_tokens"] + n)

    def test_chat_completion_streamed_and_not(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is free software?"}]
        status, body = SERVER.post_json("/v1/chat/completions", {"model": "tiny_chat", "messages": messages,
                                                                 "max_tokens": 30, "temperature": 0})
        self.assertEqual(status, 200, body)
        text, finish, n = expected(messages, 30, chat=True)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"], {"role": "assistant", "content": text})
        self.assertEqual(body["choices"][0]["finish_reason"], finish)
        status, hdrs, data = post("/v1/chat/completions", {"model": "tiny_chat", "messages": messages, "max_tokens": 30,
                                                           "temperature": 0, "stream": True,
                                                           "stream_options": {"include_usage": True}})
        self.assertEqual(status, 200)
        self.assertEqual(hdrs.get("inferd-model-version"), "1", hdrs)
        events = sse(data)
        self.assertEqual(events[-1], "[DONE]")
        first = json.loads(events[0])
        self.assertEqual(first["object"], "chat.completion.chunk")
        self.assertEqual(first["choices"][0]["delta"]["role"], "assistant")
        usage = json.loads(events[-2])
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], n)
        got, got_finish = chat_stream_text(events[:-1])
        self.assertEqual(got, text)
        self.assertEqual(got_finish, finish)
        for e in events[:-2]:
            self.assertIsNone(json.loads(e)["usage"])

    def test_many_concurrent_clients_get_their_solo_answers(self):
        models = ["tiny_chat", "tiny_chat_small_kv", "tiny_chat_static", "tiny_chat_no_prefix"]
        results, errors = {}, []

        def one(i):
            try:
                prompt = PROMPTS[i % len(PROMPTS)]
                model = models[i % len(models)]
                body = {"model": model, "prompt": prompt, "max_tokens": 16 + i % 5, "temperature": 0}
                if i % 2:
                    body["stream"] = True
                    status, _, data = post("/v1/completions", body)
                    events = sse(data)
                    text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
                else:
                    status, _, data = post("/v1/completions", body)
                    text = json.loads(data)["choices"][0]["text"]
                results[i] = (status, text, prompt, 16 + i % 5)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 32)
        for i, (status, text, prompt, n) in results.items():
            self.assertEqual(status, 200)
            self.assertEqual(text, expected(prompt, n)[0], (i, prompt))

    def test_a_full_kv_cache_preempts_instead_of_failing(self):
        # 12 blocks of 16 positions; eight requests of ~90 positions (6 blocks) each cannot all run at once.
        before = self.metric("vllm:num_preemptions_total", "tiny_chat_small_kv")
        results, errors = {}, []

        def one(i):
            try:
                status, body = SERVER.post_json("/v1/completions", {"model": "tiny_chat_small_kv", "prompt": PROMPTS[i],
                                                                    "max_tokens": 80, "temperature": 0})
                results[i] = (status, body)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(errors, [])
        for i, (status, body) in sorted(results.items()):
            self.assertEqual(status, 200, body)
            self.assertEqual(body["choices"][0]["text"], expected(PROMPTS[i], 80)[0], PROMPTS[i])
        self.assertGreater(self.metric("vllm:num_preemptions_total", "tiny_chat_small_kv"), before)

    def test_prefix_cache_serves_the_next_turn(self):
        history = [{"role": "user", "content": "Tell me about the GNU General Public License and copying it."}]
        status, first = SERVER.post_json("/v1/chat/completions", {"model": "tiny_chat", "messages": history,
                                                                  "max_tokens": 12, "temperature": 0})
        self.assertEqual(status, 200, first)
        history += [first["choices"][0]["message"], {"role": "user", "content": "And then?"}]
        status, second = SERVER.post_json("/v1/chat/completions", {"model": "tiny_chat", "messages": history,
                                                                   "max_tokens": 12, "temperature": 0})
        self.assertEqual(status, 200, second)
        self.assertGreaterEqual(second["usage"]["prompt_tokens_details"]["cached_tokens"], 16)
        self.assertEqual(second["choices"][0]["message"]["content"], expected(history, 12, chat=True)[0])

    def test_a_client_that_disconnects_frees_its_blocks(self):
        c = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps({"model": "tiny_chat_no_prefix", "prompt": "x", "max_tokens": 900,
                                                         "temperature": 1.0, "ignore_eos": True, "stream": True}))
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        r.fp.readline()  # the first event has arrived: the request holds KV blocks
        C.wait_until(self, "blocks in use", lambda: self.metric("vllm:kv_cache_usage_perc", "tiny_chat_no_prefix") > 0)
        c.sock.close()
        c.close()
        C.wait_until(self, "the blocks freed", lambda: self.metric("vllm:kv_cache_usage_perc", "tiny_chat_no_prefix") == 0
                     and self.metric("vllm:num_requests_running", "tiny_chat_no_prefix") == 0)

    def test_stop_strings_spanning_tokens(self):
        text = expected(PROMPTS[0], 24)[0]
        stop = text[6:10]
        status, body = SERVER.post_json("/v1/completions", {"model": "tiny_chat", "prompt": PROMPTS[0], "max_tokens": 24,
                                                            "temperature": 0, "stop": [stop]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["text"], text[:text.find(stop)])
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")

    def test_seeded_sampling_repeats_and_n_choices(self):
        req = {"model": "tiny_chat", "prompt": "free", "max_tokens": 10, "temperature": 1.0, "seed": 5, "n": 3}
        s1, a = SERVER.post_json("/v1/completions", req)
        s2, b = SERVER.post_json("/v1/completions", req)
        self.assertEqual((s1, s2), (200, 200))
        self.assertEqual([c["text"] for c in a["choices"]], [c["text"] for c in b["choices"]])
        self.assertEqual([c["index"] for c in a["choices"]], [0, 1, 2])
        self.assertEqual(a["usage"]["completion_tokens"], 30)

    def test_logprobs(self):
        status, body = SERVER.post_json("/v1/chat/completions", {
            "model": "tiny_chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0,
            "logprobs": True, "top_logprobs": 3})
        self.assertEqual(status, 200, body)
        content = body["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 4)
        for entry in content:
            self.assertLessEqual(entry["logprob"], 0.0)
            self.assertEqual(len(entry["top_logprobs"]), 3)
            self.assertEqual(entry["top_logprobs"][0]["logprob"], entry["logprob"])  # greedy takes the top one

    def test_the_official_openai_sdk_works_unchanged(self):
        sdk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_sdk")
        self.assertTrue(os.path.isdir(os.path.join(sdk, "node_modules", "openai")),
                        "the OpenAI SDK is missing: scripts/setup.sh installs it")
        question = "What is free software?"
        r = subprocess.run(["node", os.path.join(sdk, "client.mjs"), "http://127.0.0.1:%d/v1" % SERVER.port, "tiny_chat",
                            PROMPTS[0], question], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertIn("tiny_chat", got["models"])
        messages = [{"role": "user", "content": question}]
        text, finish, n = expected(messages, 20, chat=True)
        self.assertEqual(got["chat"]["text"], text)
        self.assertEqual(got["chat"]["finish"], finish)
        self.assertEqual(got["chat"]["usage"]["completion_tokens"], n)
        self.assertEqual(got["chat_stream"]["text"], text)
        self.assertEqual(got["chat_stream"]["finish"], finish)
        self.assertEqual(got["chat_stream"]["usage"]["completion_tokens"], n)
        self.assertEqual(got["completion"]["text"], expected(PROMPTS[0], 16)[0])
        self.assertEqual(got["completion_stream"], expected(PROMPTS[0], 16)[0])
        self.assertEqual(got["structured"]["finish"], "stop", got["structured"])
        jsonschema.validate(json.loads(got["structured"]["text"]), got["structured"]["schema"])
        self.assertEqual(got["not_found"]["status"], 404)
        self.assertEqual(got["bad_request"]["status"], 400)
        self.assertEqual(got["bad_request"]["type"], "invalid_request_error")

    def test_langchain_chat_openai_works_unchanged(self):
        sdk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_sdk")
        self.assertTrue(os.path.isdir(os.path.join(sdk, "node_modules", "@langchain", "openai")),
                        "LangChain is missing: scripts/setup.sh installs it")
        question = "What is free software?"
        r = subprocess.run(["node", os.path.join(sdk, "langchain_client.mjs"), "http://127.0.0.1:%d/v1" % SERVER.port,
                            "tiny_chat", question], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        plain = expected([{"role": "user", "content": question}], 20, chat=True)[0]
        brief = expected([{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}], 20,
                         chat=True)[0]
        self.assertEqual(got["invoke"], plain)
        self.assertEqual(got["stream"], plain)
        self.assertEqual(got["batch"], [plain, brief])

    def test_structured_outputs_validate_against_their_schemas(self):
        # 200 answers under 5 schemas, sampled (temperature 1, seeds), 8 at a time so structured sequences share
        # batches; through OpenAI's response_format, vLLM's guided_json and structured_outputs, streamed and not.
        # Every one must parse and validate (jsonschema), and end by itself ("stop"), not by max_tokens.
        results, errors = [], []
        lock = threading.Lock()

        def one(i):
            schema = STRUCTURED_SCHEMAS[i % len(STRUCTURED_SCHEMAS)]
            form = (i // len(STRUCTURED_SCHEMAS)) % 4
            body = {"model": "tiny_chat", "max_tokens": 900, "seed": i, "temperature": 1.0}
            if form in (0, 1):
                path = "/v1/chat/completions"
                body["messages"] = [{"role": "user", "content": "Answer in JSON, please (%d)" % i}]
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "s%d" % i, "schema": schema, "strict": True}}
            else:
                path = "/v1/completions"
                body["prompt"] = "JSON answer number %d:" % i
                if form == 2:
                    body["guided_json"] = schema
                else:
                    body["structured_outputs"] = {"json": schema}
            body["stream"] = form in (1, 3)
            try:
                status, _, data = post(path, body)
                self.assertEqual(status, 200, data[:300])
                if body["stream"]:
                    events = sse(data)
                    if path.endswith("chat/completions"):
                        text, finish = chat_stream_text(events)
                    else:
                        chunks = [json.loads(e) for e in events[:-1]]
                        text = "".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"])
                        finish = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"]][-1]
                else:
                    answer = json.loads(data)
                    choice = answer["choices"][0]
                    text = choice["message"]["content"] if "message" in choice else choice["text"]
                    finish = choice["finish_reason"]
                with lock:
                    results.append((i, schema, text, finish))
            except Exception as e:  # noqa: BLE001 -- reported below with the request
                with lock:
                    errors.append((i, repr(e)))

        pending = list(range(200))
        while pending:
            batch, pending = pending[:8], pending[8:]
            threads = [threading.Thread(target=one, args=(i,)) for i in batch]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
                self.assertFalse(t.is_alive(), "a structured request did not finish in 120 s")
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 200)
        for i, schema, text, finish in results:
            self.assertEqual(finish, "stop", (i, text))
            jsonschema.validate(json.loads(text), schema)
        # The metrics count them; every schema after its first request came from the cache.
        self.assertGreaterEqual(self.metric("inferd_structured_output_requests_total", "tiny_chat"), 200)
        self.assertGreaterEqual(self.metric("inferd_structured_output_cache_hits_total", "tiny_chat"), 195)
        self.assertGreater(self.metric("inferd_structured_output_masks_total", "tiny_chat"), 200)
        self.assertIn("inferd_structured_output_compile_seconds_count{", SERVER.metrics())

    def test_choice_regex_grammar_and_json_object(self):
        def text_of(body):
            status, answer = SERVER.post_json("/v1/completions", dict(body, model="tiny_chat", prompt="Say:"))
            self.assertEqual(status, 200, answer)
            return answer["choices"][0]["text"], answer["choices"][0]["finish_reason"]
        for seed in range(10):
            text, finish = text_of({"guided_choice": ["red", "green", "blue"], "seed": seed, "max_tokens": 20})
            self.assertIn(text, ["red", "green", "blue"])
            self.assertEqual(finish, "stop")
            text, finish = text_of({"guided_regex": r"\d{3}-[a-z]{2,4}( ok)?", "seed": seed, "max_tokens": 20})
            self.assertRegex(text, r"^\d{3}-[a-z]{2,4}( ok)?$")
            grammar = 'root ::= "(" item ("," item){0,3} ")"\nitem ::= [0-9] | "x"\n'
            text, finish = text_of({"guided_grammar": grammar, "seed": seed, "max_tokens": 30})
            self.assertRegex(text, r"^\(([0-9]|x)(,([0-9]|x)){0,3}\)$")
            self.assertEqual(finish, "stop")
            text, _ = text_of({"grammar": 'root ::= "yes" | "no"', "seed": seed, "max_tokens": 5})  # llama.cpp's
            self.assertIn(text, ["yes", "no"])
        # KServe's generate extension: the same fields among its parameters (objects and arrays as JSON).
        for seed in range(3):
            status, answer = SERVER.post_json("/v2/models/tiny_chat/generate", {
                "text_input": "x", "parameters": {"seed": seed, "max_tokens": 60, "guided_json": {
                    "type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}},
                    "required": ["n"]}}})
            self.assertEqual(status, 200, answer)
            self.assertIn(json.loads(answer["text_output"])["n"], [1, 2, 3, 4, 5])
        # Any JSON object: random weights write long strings, so only the answers that ended are parsed, and a
        # stream that ran out of tokens is still a prefix the grammar allows (it starts with "{").
        ended = 0
        for seed in range(12):
            text, finish = text_of({"response_format": {"type": "json_object"}, "seed": seed, "max_tokens": 300,
                                    "temperature": 0.7})
            self.assertTrue(text.lstrip().startswith("{"), text)
            if finish == "stop":
                self.assertIsInstance(json.loads(text), dict)
                ended += 1
        self.assertGreater(ended, 0)

    def test_structured_outputs_that_cannot_be_kept_get_400(self):
        cases = [
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "array", "uniqueItems": True}}}}, "uniqueItems"),
            ({"guided_json": {"type": "string", "format": "email"}}, "format 'email'"),
            ({"guided_json": {"type": "object", "patternProperties": {"^a": {}}}}, "patternProperties"),
            ({"guided_regex": "(?<=a)b"}, "lookaround"),
            ({"guided_regex": "(a)\\1"}, "backreference"),
            ({"guided_grammar": "root ::= missing"}, "rule 'missing' is used but not defined"),
            ({"guided_grammar": "root ::= root \"a\""}, "left-recursive"),
            ({"guided_choice": []}, "guided_choice"),
            ({"response_format": {"type": "xml"}}, "response_format.type"),
            ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
            ({"guided_regex": "a", "guided_choice": ["a"]}, "not both"),
            ({"guided_json": "{not json"}, "guided_json is not valid JSON"),
        ]
        for extra, needle in cases:
            for path, base in (("/v1/completions", {"prompt": "x"}),
                               ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
                body = dict(base, model="tiny_chat", max_tokens=5, **extra)
                status, answer = SERVER.post_json(path, body)
                self.assertEqual(status, 400, (extra, answer))
                self.assertIn(needle, answer["error"]["message"], extra)
        # A streamed request is refused before its stream begins.
        status, _, data = post("/v1/completions", {"model": "tiny_chat", "prompt": "x", "stream": True,
                                                   "guided_json": {"not": {}}})
        self.assertEqual(status, 400, data)
        self.assertIn("'not'", json.loads(data)["error"]["message"])
        # The server is still well.
        status, answer = SERVER.post_json("/v1/completions", {"model": "tiny_chat", "prompt": "x", "max_tokens": 2})
        self.assertEqual(status, 200, answer)

    def greedy_as_reference(self, model, ref):
        """`model`'s greedy answers to four prompts, checked token for token against `ref`'s: [(prompt, ids)]."""
        outs = []
        for prompt in PROMPTS[:4]:
            ids = ref.prompt_ids(prompt)
            out, finish = ref.greedy(ids, 12)
            status, answer = SERVER.post_json("/v1/completions", {"model": model, "prompt": prompt,
                                                                   "max_tokens": 12, "temperature": 0})
            self.assertEqual(status, 200, answer)
            self.assertEqual(answer["choices"][0]["text"], ref.text(ids, out), prompt)
            self.assertEqual(answer["choices"][0]["finish_reason"], finish)
            outs.append((prompt, out))
        return outs

    def test_int8_weights_match_the_dequantized_reference(self):
        # quantization: int8 answers as the float64 reference does over the same weights quantized and dequantized
        # (token for token), streamed and not; and it is a different model from FP32 (the weights did change).
        ref8 = llm_fixtures.Reference(C.REPO, int8=True)
        differs = 0
        for prompt, out in self.greedy_as_reference("tiny_chat_int8", ref8):
            differs += out != REF.greedy(ref8.prompt_ids(prompt), 12)[0]
        self.assertGreater(differs, 0, "int8 greedy equals FP32 on every prompt: were the weights quantized?")
        status, _, data = post("/v1/completions", {"model": "tiny_chat_int8", "prompt": PROMPTS[0], "max_tokens": 12,
                                                   "temperature": 0, "stream": True})
        self.assertEqual(status, 200)
        chunks = [json.loads(e) for e in sse(data)[:-1]]
        ids = ref8.prompt_ids(PROMPTS[0])
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks if c["choices"]),
                         ref8.text(ids, ref8.greedy(ids, 12)[0]))
        # An unknown quantization fails the load (503, as every failed load answers), naming the choices.
        status, body = SERVER.post_json("/v2/repository/models/tiny_chat_bad_quant/load", {})
        self.assertEqual(status, 503, body)
        self.assertIn("'quantization' 'fp4' is not one of none, int8", body["error"])

    def test_bf16_weights_match_the_rounded_reference(self):
        # quantization: bf16 answers as the float64 reference does over the same weights rounded to bfloat16 (token
        # for token), and the load line says so.
        self.assertEqual(len(self.greedy_as_reference("tiny_chat_bf16", llm_fixtures.Reference(C.REPO, bf16=True))), 4)
        self.assertTrue(any("tiny_chat_bf16" in line and "bf16 weights" in line for line in SERVER.log))

    def test_speculative_decoding_gives_the_reference_text(self):
        # speculative_decoding: prompt_lookup (the model's parameter) drafts tokens from the prompt and the output
        # so far and keeps those the model agrees with: the text is the float64 reference's token for token,
        # streamed and not, while drafts were made and some kept (random weights repeat themselves); a request
        # turns it off; a bad value fails the load naming the choices.
        def counter(name):
            return self.metric(name, "tiny_chat_spec")

        drafted0, accepted0 = (counter("vllm:spec_decode_num_draft_tokens_total"),
                               counter("vllm:spec_decode_num_accepted_tokens_total"))
        prompts = PROMPTS[:6] + ["free software free software free software", "0. 1. 2. 3. 4. 5."]
        for prompt in prompts:
            status, answer = SERVER.post_json("/v1/completions", {"model": "tiny_chat_spec", "prompt": prompt,
                                                                   "max_tokens": 48, "temperature": 0})
            self.assertEqual(status, 200, answer)
            want = expected(prompt, 48)
            self.assertEqual(answer["choices"][0]["text"], want[0], prompt)
            self.assertEqual(answer["choices"][0]["finish_reason"], want[1], prompt)
            self.assertEqual(answer["usage"]["completion_tokens"], want[2], prompt)
        drafted, accepted = (counter("vllm:spec_decode_num_draft_tokens_total") - drafted0,
                             counter("vllm:spec_decode_num_accepted_tokens_total") - accepted0)
        self.assertGreater(drafted, 0)
        self.assertGreater(accepted, 0)
        self.assertLessEqual(accepted, drafted)
        # Streamed, and beside other requests (four at once, under speculative_max_batch).
        results = [None] * 4

        def stream(i):
            results[i] = post("/v1/completions", {"model": "tiny_chat_spec", "prompt": prompts[i + 4],
                                                  "max_tokens": 48, "temperature": 0, "stream": True})

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for i, (status, _, data) in enumerate(results):
            self.assertEqual(status, 200)
            chunks = [json.loads(e) for e in sse(data)[:-1]]
            self.assertEqual("".join(c["choices"][0]["text"] for c in chunks if c["choices"]),
                             expected(prompts[i + 4], 48)[0])
        # Off for one request: no drafts.
        before = counter("vllm:spec_decode_num_drafts_total")
        status, answer = SERVER.post_json("/v1/completions", {"model": "tiny_chat_spec", "prompt": prompts[6],
                                                               "max_tokens": 48, "temperature": 0,
                                                               "speculative_decoding": False})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["choices"][0]["text"], expected(prompts[6], 48)[0])
        self.assertEqual(counter("vllm:spec_decode_num_drafts_total"), before)
        status, body = SERVER.post_json("/v1/completions", {"model": "tiny_chat_spec", "prompt": "x",
                                                             "speculative_decoding": "yes"})
        self.assertEqual(status, 400, body)
        self.assertIn("speculative_decoding", body["error"]["message"])
        status, body = SERVER.post_json("/v2/repository/models/tiny_chat_bad_spec/load", {})
        self.assertEqual(status, 503, body)
        self.assertIn("'speculative_decoding' must be prompt_lookup or off", body["error"])

    def test_models_list(self):
        status, body = SERVER.get_json("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertIn("tiny_chat", [m["id"] for m in body["data"]])

    def test_invalid_requests_get_openai_errors(self):
        cases = [
            ({"model": "nope", "prompt": "x"}, 404, "does not exist"),
            ({"model": "tiny_chat", "prompt": "x", "max_tokens": 5000}, 400, "maximum context length"),
            ({"model": "tiny_chat", "prompt": "x", "temperature": 5}, 400, "temperature"),
            ({"model": "tiny_chat", "prompt": "x", "top_p": 0}, 400, "top_p"),
            ({"model": "tiny_chat", "prompt": "x", "n": 0}, 400, "'n'"),
            ({"model": "tiny_chat"}, 400, "prompt"),
            ({"model": "tiny_chat", "prompt": "x", "tools": [{"type": "function"}]}, 400, "tools"),
        ]
        for body, code, needle in cases:
            status, answer = SERVER.post_json("/v1/completions", body)
            self.assertEqual(status, code, (body, answer))
            self.assertIn(needle, answer["error"]["message"], body)
            self.assertIn("type", answer["error"])
        chats = [
            ({"model": "tiny_chat", "messages": "hi"}, 400, "messages"),
            ({"model": "tiny_chat", "messages": []}, 400, "messages"),
            ({"model": "tiny_chat", "messages": [{"role": "robot", "content": "x"}]}, 400, "role"),
            ({"model": "tiny_chat", "messages": [{"content": "x"}]}, 400, "role"),
            ({"model": "tiny_chat", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "image_url"),
        ]
        for body, code, needle in chats:
            status, answer = SERVER.post_json("/v1/chat/completions", body)
            self.assertEqual(status, code, (body, answer))
            self.assertIn(needle, answer["error"]["message"], body)
        status, _, data = SERVER.request("POST", "/v1/chat/completions", b"{not json")
        self.assertEqual(status, 400)
        self.assertIn("error", json.loads(data))
        # A model that is not generative.
        status, answer = SERVER.post_json("/v1/completions", {"model": "mlp", "prompt": "x"})
        self.assertEqual(status, 400, answer)
        self.assertIn("not a generative model", answer["error"]["message"])

    def test_metrics_use_vllm_names(self):
        SERVER.post_json("/v1/completions", {"model": "tiny_chat", "prompt": "x", "max_tokens": 3})
        text = SERVER.metrics()
        for name in ["vllm:time_to_first_token_seconds_bucket", "vllm:time_per_output_token_seconds_count",
                     "vllm:e2e_request_latency_seconds_sum", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                     "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                     "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total"]:
            self.assertIn(name + "{", text)
        self.assertGreater(self.metric("vllm:generation_tokens_total", "tiny_chat"), 0)
        # What the Gateway API Inference Extension's endpoint picker reads (its model server protocol): the queue,
        # the KV cache's use under vLLM's older name too, and the LoRA adapters (none running), its value a timestamp.
        self.assertEqual(self.metric("vllm:gpu_cache_usage_perc", "tiny_chat"),
                         self.metric("vllm:kv_cache_usage_perc", "tiny_chat"))
        lora = [line for line in text.splitlines()
                if line.startswith("vllm:lora_requests_info{") and 'model="tiny_chat"' in line]
        self.assertEqual(len(lora), 1, text)
        self.assertIn('max_lora="16",running_lora_adapters="",waiting_lora_adapters=""', lora[0])
        self.assertGreater(float(lora[0].rsplit(" ", 1)[1]), 1.7e9, "the time of the last update")

    def metric(self, name, model):
        for line in SERVER.metrics().splitlines():
            if line.startswith(name + "{") and 'model="%s"' % model in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0
