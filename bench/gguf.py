#!/usr/bin/python3
"""A Llama model folder as inferd serves it (config.json, model.safetensors, a SentencePiece tokenizer.model) written
as a GGUF file that llama.cpp reads (F32 tensors, or the weight matrices as Q8_0), for the llama.cpp baseline of
`make bench-generative`.

GGUF v3 as llama.cpp's gguf.h and docs describe it: a header, typed key/value metadata (the `llama` architecture's
hyperparameters and the SentencePiece vocabulary as tokenizer.ggml.*), tensor infos (dimensions innermost first)
and the tensor data, each aligned to 32 bytes. Q and K projections are stored with llama.cpp's rotary layout: the
halves Hugging Face's rotate_half pairs up become adjacent pairs.

Usage: gguf.py MODEL_DIR OUT.gguf [q8_0]
"""
import json
import os
import struct
import sys

import numpy as np
import sentencepiece as spm

ALIGN = 32
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32 = 0
GGML_Q8_0 = 8  # blocks of 32: an FP16 scale, then 32 int8
# llama.cpp's token types.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, value):
    out = _str(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + _str(value)
    if vtype == T_UINT32:
        return out + struct.pack("<I", value)
    if vtype == T_INT32:
        return out + struct.pack("<i", value)
    if vtype == T_FLOAT32:
        return out + struct.pack("<f", value)
    if vtype == T_BOOL:
        return out + struct.pack("<?", value)
    raise ValueError(vtype)


def _array(key, etype, values):
    out = _str(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
    if etype == T_STRING:
        return out + b"".join(_str(v) for v in values)
    if etype == T_FLOAT32:
        return out + struct.pack("<%df" % len(values), *values)
    if etype == T_INT32:
        return out + struct.pack("<%di" % len(values), *values)
    raise ValueError(etype)


def _permute(w, heads):
    """HF's q/k rows (per head: the first half, then the second half of each rotary pair) -> llama.cpp's (pairs
    adjacent), as llama.cpp's converter does."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_safetensors(path):
    """name -> float32 array (F32, F16 and BF16 tensors)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = data[a:b]
        if e["dtype"] == "F32":
            t = np.frombuffer(raw, dtype=np.float32)
        elif e["dtype"] == "F16":
            t = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        elif e["dtype"] == "BF16":
            t = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError("%s: dtype %s" % (name, e["dtype"]))
        out[name] = t.reshape(e["shape"])
    return out


def vocabulary(tokenizer_model):
    sp = spm.SentencePieceProcessor(model_file=tokenizer_model)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        if sp.is_unknown(i):
            types.append(UNKNOWN)
        elif sp.is_control(i):
            types.append(CONTROL)
        elif sp.is_byte(i):
            types.append(BYTE)
        elif sp.is_unused(i):
            types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
    # SentencePiece's user-defined symbols (<|im_start|>, ...) are "normal" to it: llama.cpp wants them whole.
    for i, t in enumerate(tokens):
        if t.startswith("<|") and t.endswith("|>"):
            types[i] = USER_DEFINED
    return tokens, scores, types


def q8_0(t):
    """A 2-D float32 array as GGML Q8_0 bytes (per row, blocks of 32: d = max|x| / 127 as FP16, q = round(x / d))."""
    blocks = t.reshape(-1, 32).astype(np.float32)
    d = np.abs(blocks).max(axis=1) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.clip(np.round(blocks * inv[:, None]), -127, 127).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def write(model_dir, out_path, quantize_q8_0=False):
    """The model as GGUF: every tensor F32, or with `quantize_q8_0` the 2-D weight matrices as Q8_0 (norms stay F32)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    H, L = c["hidden_size"], c["num_hidden_layers"]
    nh, nkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    tensors = [("token_embd.weight", w["model.embed_tokens.weight"])]
    for i in range(L):
        p = "model.layers.%d." % i
        tensors += [
            ("blk.%d.attn_norm.weight" % i, w[p + "input_layernorm.weight"]),
            ("blk.%d.attn_q.weight" % i, _permute(w[p + "self_attn.q_proj.weight"], nh)),
            ("blk.%d.attn_k.weight" % i, _permute(w[p + "self_attn.k_proj.weight"], nkv)),
            ("blk.%d.attn_v.weight" % i, w[p + "self_attn.v_proj.weight"]),
            ("blk.%d.attn_output.weight" % i, w[p + "self_attn.o_proj.weight"]),
            ("blk.%d.ffn_norm.weight" % i, w[p + "post_attention_layernorm.weight"]),
            ("blk.%d.ffn_gate.weight" % i, w[p + "mlp.gate_proj.weight"]),
            ("blk.%d.ffn_up.weight" % i, w[p + "mlp.up_proj.weight"]),
            ("blk.%d.ffn_down.weight" % i, w[p + "mlp.down_proj.weight"]),
        ]
    tensors.append(("output_norm.weight", w["model.norm.weight"]))
    tensors.append(("output.weight", w["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else w["lm_head.weight"]))

    tokens, scores, types = vocabulary(os.path.join(model_dir, "tokenizer.model"))
    head_dim = H // nh
    kvs = [
        _kv("general.architecture", T_STRING, "llama"),
        _kv("general.name", T_STRING, os.path.basename(os.path.dirname(os.path.abspath(model_dir))) or "model"),
        _kv("general.alignment", T_UINT32, ALIGN),
        _kv("general.file_type", T_UINT32, 7 if quantize_q8_0 else 0),  # MOSTLY_Q8_0, or all F32
        _kv("llama.context_length", T_UINT32, c["max_position_embeddings"]),
        _kv("llama.embedding_length", T_UINT32, H),
        _kv("llama.block_count", T_UINT32, L),
        _kv("llama.feed_forward_length", T_UINT32, c["intermediate_size"]),
        _kv("llama.rope.dimension_count", T_UINT32, head_dim),
        _kv("llama.attention.head_count", T_UINT32, nh),
        _kv("llama.attention.head_count_kv", T_UINT32, nkv),
        _kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, c["rms_norm_eps"]),
        _kv("llama.rope.freq_base", T_FLOAT32, c.get("rope_theta", 10000.0)),
        _kv("llama.vocab_size", T_UINT32, c["vocab_size"]),
        _kv("tokenizer.ggml.model", T_STRING, "llama"),
        _array("tokenizer.ggml.tokens", T_STRING, tokens),
        _array("tokenizer.ggml.scores", T_FLOAT32, scores),
        _array("tokenizer.ggml.token_type", T_INT32, types),
        _kv("tokenizer.ggml.bos_token_id", T_UINT32, c.get("bos_token_id", 1)),
        _kv("tokenizer.ggml.eos_token_id", T_UINT32, c.get("eos_token_id", 2)),
        _kv("tokenizer.ggml.unknown_token_id", T_UINT32, 0),
        _kv("tokenizer.ggml.add_bos_token", T_BOOL, True),
        _kv("tokenizer.ggml.add_eos_token", T_BOOL, False),
    ]
    datas, infos, offset = [], [], 0
    for name, t in tensors:
        t = np.ascontiguousarray(t, dtype=np.float32)
        quant = quantize_q8_0 and t.ndim == 2 and t.shape[1] % 32 == 0
        b = q8_0(t) if quant else t.tobytes()
        dims = list(reversed(t.shape))
        infos.append(_str(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims) +
                     struct.pack("<IQ", GGML_Q8_0 if quant else GGML_F32, offset))
        datas.append(b)
        offset += (len(b) + ALIGN - 1) // ALIGN * ALIGN
    with open(out_path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
        for kv in kvs:
            f.write(kv)
        for info in infos:
            f.write(info)
        f.write(b"\0" * ((-f.tell()) % ALIGN))
        for b in datas:
            f.write(b)
            f.write(b"\0" * ((-len(b)) % ALIGN))


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2], quantize_q8_0=len(sys.argv) > 3 and sys.argv[3] == "q8_0")
