"""Generative model fixtures for the integration suite: `tiny_chat`, a Llama-shaped decoder with random weights
and a SentencePiece tokenizer (trained by python3-sentencepiece on the GPL's text, with ChatML's tokens), in the
Hugging Face layout; copies with a tiny KV budget (preemption) and static batching. `Reference` runs the same
weights through the independent float64 reference (src/backends/llm/testdata/reference.py)."""
import json
import os
import shutil
import sys

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "backends", "llm", "testdata"))
import reference  # noqa: E402

CONFIG = {"model_type": "llama", "vocab_size": 400, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
          "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}
# Bytes of KV cache per 16-position block: layers * (K, V) * 16 * kv_heads * head_dim * 4.
BLOCK_BYTES = 2 * 2 * 16 * 2 * 16 * 4


def config_pbtxt(name, **params):
    out = 'name: "%s"\nbackend: "llm"\n' % name
    for k, v in sorted(dict({"chat_template": "chatml", "kv_block_size": "16"}, **params).items()):
        out += 'parameters { key: "%s" value: { string_value: "%s" } }\n' % (k, v)
    return out


def make(repo):
    d = os.path.join(repo, "tiny_chat", "1")
    os.makedirs(d, exist_ok=True)
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    corpus = os.path.join(d, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(text)
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "tokenizer"), vocab_size=CONFIG["vocab_size"],
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2,
                                   unk_id=0, pad_id=-1, user_defined_symbols=["<|im_start|>", "<|im_end|>"],
                                   minloglevel=2, num_threads=1)
    os.remove(corpus)
    os.remove(os.path.join(d, "tokenizer.vocab"))
    g = torch.Generator().manual_seed(7)
    weights = {}
    for n, shape in reference.llama_shapes(CONFIG, False).items():
        if n.endswith("norm.weight") or n.endswith("layernorm.weight"):
            weights[n] = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            weights[n] = 0.3 * torch.randn(shape, generator=g)
    reference.write_safetensors(os.path.join(d, "model.safetensors"), weights, "F32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}, f)
    with open(os.path.join(repo, "tiny_chat", "config.pbtxt"), "w") as f:
        f.write(config_pbtxt("tiny_chat", kv_cache_bytes=str(BLOCK_BYTES * 256), max_num_seqs="32"))
    # A KV budget of 12 blocks (192 positions): concurrent requests must preempt one another.
    copy(repo, "tiny_chat_small_kv", kv_cache_bytes=str(BLOCK_BYTES * 12))
    copy(repo, "tiny_chat_static", kv_cache_bytes=str(BLOCK_BYTES * 256), scheduling="static")
    copy(repo, "tiny_chat_no_prefix", kv_cache_bytes=str(BLOCK_BYTES * 256), enable_prefix_caching="false")
    copy(repo, "tiny_chat_int8", kv_cache_bytes=str(BLOCK_BYTES * 256), quantization="int8")
    copy(repo, "tiny_chat_bf16", kv_cache_bytes=str(BLOCK_BYTES * 256), quantization="bf16")
    copy(repo, "tiny_chat_bad_quant", quantization="fp4")
    copy(repo, "tiny_chat_spec", kv_cache_bytes=str(BLOCK_BYTES * 256), speculative_decoding="prompt_lookup",
         num_speculative_tokens="6")
    copy(repo, "tiny_chat_bad_spec", speculative_decoding="eagle")
    # LoRA adapters in the repository (tiny_chat/loras/<name>/), and tiny_chat with each merged into its weights.
    base = reference.read_safetensors(os.path.join(d, "model.safetensors"))
    for name in REPO_ADAPTERS:
        tensors, scaling, dtype = write_adapter(os.path.join(repo, "tiny_chat", "loras", name), name)
        merged = os.path.join(repo, "tiny_chat_merged_" + name)
        copy(repo, "tiny_chat_merged_" + name, kv_cache_bytes=str(BLOCK_BYTES * 64))
        reference.write_safetensors(os.path.join(merged, "1", "model.safetensors"),
                                    reference.merge_lora(base, tensors, scaling, dtype), "F32")


ALL_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# name: rank, alpha, target modules, rslora, layers, dtype, seed
ADAPTERS = {"sql": (4, 8, ["q_proj", "v_proj"], False, None, "F32", 21),
            "poet": (8, 16, ALL_MODULES, True, None, "F16", 22),
            "late": (2, 4, ["k_proj", "o_proj", "down_proj"], False, [1], "BF16", 23)}
REPO_ADAPTERS = ["sql", "poet"]  # "late" is loaded through the API by the suite


def write_adapter(d, name):
    """A PEFT adapter folder for tiny_chat; returns (tensors, scaling, dtype) to merge it."""
    r, alpha, targets, rslora, layers, dtype, seed = ADAPTERS[name]
    tensors = reference.lora_tensors(CONFIG, r, targets, seed, layers)
    reference.write_lora(d, r, alpha, targets, tensors, dtype, rslora, layers, base="inferd/tiny_chat")
    return tensors, (alpha / r ** 0.5 if rslora else alpha / r), dtype


def copy(repo, name, **params):
    shutil.rmtree(os.path.join(repo, name), ignore_errors=True)
    shutil.copytree(os.path.join(repo, "tiny_chat", "1"), os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config_pbtxt(name, **params))


class Reference:
    """Greedy generation with the float64 reference and the model's own tokenizer."""

    def __init__(self, repo, int8=False, lora=None, bf16=False):
        d = os.path.join(repo, "tiny_chat", "1")
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
        W = load_safetensors(os.path.join(d, "model.safetensors"))
        if lora:  # the adapter merged into the weights (PEFT's merge_and_unload), in float64
            r, alpha, targets, rslora, layers, dtype, seed = ADAPTERS[lora]
            tensors = reference.lora_tensors(CONFIG, r, targets, seed, layers)
            W = reference.merge_lora({k: v.to(torch.float64) for k, v in W.items()}, tensors,
                                     alpha / r ** 0.5 if rslora else alpha / r, dtype)
        if int8:  # the server's quantization: int8, dequantized: every projection matrix, not the embedding or norms
            W = {k: q8_dequantized(v) if k.endswith("proj.weight") or k == "lm_head.weight" else v for k, v in W.items()}
        if bf16:  # the server's quantization: bf16: the same matrices rounded to bfloat16
            W = {k: bf16_rounded(v) if k.endswith("proj.weight") or k == "lm_head.weight" else v for k, v in W.items()}
        self.W = {k: v.to(torch.float64) for k, v in W.items()}

    def prompt_ids(self, text):
        return [1] + self.sp.encode(text)

    def chat_ids(self, messages):
        text = "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]) for m in messages)
        return self.prompt_ids(text + "<|im_start|>assistant\n")

    def greedy(self, ids, max_tokens, stop_ids=(2,)):
        """The generated ids (the stop id left out) and the finish reason."""
        ids, out = list(ids), []
        for _ in range(max_tokens):
            nxt = int(torch.argmax(reference.llama_logits(self.W, CONFIG, ids)[-1]))
            if nxt in stop_ids:
                return out, "stop"
            ids.append(nxt)
            out.append(nxt)
        return out, "length"

    def text(self, prompt_ids, out_ids):
        """The text of out_ids as the server streams it: decoded after the prompt, without special pieces."""
        return self.sp.decode(prompt_ids[-5:] + out_ids)[len(self.sp.decode(prompt_ids[-5:])):]


def q8_dequantized(w):
    """w through the server's Q8 (blocks of 32 per row, scale max|x| / 127, round half to even), in float32 as the
    server computes it, back to float32 values."""
    b = w.to(torch.float32).reshape(-1, 32)
    s = b.abs().amax(dim=1) / torch.tensor(127.0, dtype=torch.float32)
    inv = torch.where(s > 0, 1.0 / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(s))
    q = torch.clamp(torch.round(b * inv[:, None]), -127, 127)
    return (q * s[:, None]).reshape(w.shape)


def bf16_rounded(w):
    """w through the server's bfloat16 storage (round to nearest, ties to even), back to float32 values."""
    return w.to(torch.float32).to(torch.bfloat16).to(torch.float32)


def load_safetensors(path):
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + end]), dtype=torch.float32).reshape(e["shape"])
    return out
