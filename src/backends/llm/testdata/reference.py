"""An independent reference for inferd's decoders, written for the tests: Llama- and GPT-2-shaped forward passes
in float64 with no KV cache and explicit rotations, and a safetensors writer. Used by make_fixtures.py (the unit
tests' fixtures) and by the integration suite (tests/integration/llm_fixtures.py)."""
import json
import math
import struct

import torch


def write_safetensors(path, tensors, dtype):
    """The safetensors format by hand: 8-byte header length, JSON header, raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        if dtype == "BF16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        elif dtype == "F16":
            raw = t.to(torch.float16).numpy().tobytes()
        else:
            raw = t.to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def stored(t, dtype):
    """The values the C++ side reads back (rounded as stored), in float64."""
    if dtype == "BF16":
        return t.to(torch.bfloat16).to(torch.float64)
    if dtype == "F16":
        return t.to(torch.float16).to(torch.float64)
    return t.to(torch.float32).to(torch.float64)


def rms(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def attention(q, k, v):
    """q [T, nh, D], k/v [T, nkv, D]: causal softmax attention, kv heads shared by consecutive query heads."""
    T, nh, D = q.shape
    rep = nh // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(D)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("hts,shd->thd", torch.softmax(s, -1), v).reshape(T, nh * D)


def llama_logits(W, c, ids):
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    D = H // nh
    T = len(ids)
    x = W["model.embed_tokens.weight"][ids]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]

    def rope(t):  # the rotation of pairs (i, i + D/2) by angle pos * inv[i]
        a, b = t[..., : D // 2], t[..., D // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

    def lin(h, name):
        y = h @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], c["rms_norm_eps"])
        q = rope(lin(h, p + "self_attn.q_proj").view(T, nh, D))
        k = rope(lin(h, p + "self_attn.k_proj").view(T, nkv, D))
        v = lin(h, p + "self_attn.v_proj").view(T, nkv, D)
        x = x + lin(attention(q, k, v), p + "self_attn.o_proj")
        h = rms(x, W[p + "post_attention_layernorm.weight"], c["rms_norm_eps"])
        x = x + lin(torch.nn.functional.silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, W["model.norm.weight"], c["rms_norm_eps"])
    head = W["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else W["lm_head.weight"]
    return x @ head.T


def gpt2_logits(W, c, ids):
    H, nh = c["n_embd"], c["n_head"]
    D = H // nh
    T = len(ids)
    x = W["wte.weight"][ids] + W["wpe.weight"][:T]

    def ln(h, name):
        mu = h.mean(-1, keepdim=True)
        var = ((h - mu) ** 2).mean(-1, keepdim=True)
        return (h - mu) / torch.sqrt(var + c["layer_norm_epsilon"]) * W[name + ".weight"] + W[name + ".bias"]

    def conv(h, name):  # Conv1D: weight [in, out]
        return h @ W[name + ".weight"] + W[name + ".bias"]

    def gelu_new(h):
        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))

    for l in range(c["n_layer"]):
        p = f"h.{l}."
        qkv = conv(ln(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (qkv[:, i * H:(i + 1) * H].reshape(T, nh, D) for i in range(3))
        x = x + conv(attention(q, k, v), p + "attn.c_proj")
        x = x + conv(gelu_new(conv(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "ln_f") @ W["wte.weight"].T


def llama_shapes(c, bias):
    H, nh, nkv, I, V = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                        c["intermediate_size"], c["vocab_size"])
    D = H // nh
    s = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings"):
        s["lm_head.weight"] = (V, H)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        s.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                  p + "self_attn.q_proj.weight": (nh * D, H), p + "self_attn.k_proj.weight": (nkv * D, H),
                  p + "self_attn.v_proj.weight": (nkv * D, H), p + "self_attn.o_proj.weight": (H, nh * D),
                  p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H), p + "mlp.down_proj.weight": (H, I)})
        if bias:
            s.update({p + "self_attn.q_proj.bias": (nh * D,), p + "self_attn.k_proj.bias": (nkv * D,),
                      p + "self_attn.v_proj.bias": (nkv * D,)})
    return s


def read_safetensors(path):
    """The tensors of a safetensors file (F32, F16 or BF16) as float64, by name."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
        out[name] = t.to(torch.float64)
    return out


LORA_PARENTS = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
                "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def lora_tensors(c, r, targets, seed, layers=None, scale=0.15):
    """A random LoRA adapter for a Llama config in PEFT's tensor names: lora_A [r, in], lora_B [out, r]."""
    shapes = llama_shapes(c, False)
    g = torch.Generator().manual_seed(seed)
    out = {}
    for l in (layers if layers is not None else range(c["num_hidden_layers"])):
        for m in targets:
            o, i = shapes[f"model.layers.{l}.{LORA_PARENTS[m]}.{m}.weight"]
            p = f"base_model.model.model.layers.{l}.{LORA_PARENTS[m]}.{m}."
            out[p + "lora_A.weight"] = scale * torch.randn(r, i, generator=g)
            out[p + "lora_B.weight"] = scale * torch.randn(o, r, generator=g)
    return out


def write_lora(d, r, alpha, targets, tensors, dtype="F32", rslora=False, layers=None, base="inferd/base"):
    """A PEFT adapter folder: adapter_config.json and adapter_model.safetensors."""
    import os
    os.makedirs(d, exist_ok=True)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha, "target_modules": targets,
              "use_rslora": rslora, "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
              "modules_to_save": None, "use_dora": False, "base_model_name_or_path": base}
    if layers is not None:
        config["layers_to_transform"] = layers
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), tensors, dtype)


def merge_lora(W, tensors, scaling, dtype="F32"):
    """The base weights with the adapter merged in (W + scaling * B A, in float64 from the stored values), as
    PEFT's merge_and_unload computes it."""
    merged = dict(W)
    for name, a in tensors.items():
        if ".lora_A." not in name:
            continue
        b = tensors[name.replace(".lora_A.", ".lora_B.")]
        target = name[len("base_model.model."):].replace(".lora_A.weight", ".weight")
        merged[target] = W[target] + scaling * (stored(b, dtype) @ stored(a, dtype))
    return merged
