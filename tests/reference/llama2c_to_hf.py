#!/usr/bin/python3
"""Converts a llama2.c checkpoint (.bin) into a Hugging Face Llama directory (config.json + model.safetensors, f32),
independently of minfer, so that hf_reference.py can be checked against llama2.c's own outputs.

llama2.c format: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size
means an unshared classifier), then f32 arrays: token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim],
wk [L, kv_dim, dim], wv [L, kv_dim, dim], wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim],
w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim], freq_cis_real and freq_cis_imag [seq_len, head_size/2]
(skipped), then wcls [vocab, dim] when unshared.

llama2.c rotates interleaved pairs (2i, 2i+1) of each head; HF rotates the halves (i, i + d/2). As HF's own
conversion script does, the rows of wq and wk are permuted per head so that rotate_half computes the same thing:
permute(w, n_heads) = w.view(n_heads, rows / n_heads / 2, 2, cols).transpose(1, 2).reshape(rows, cols).

Usage: llama2c_to_hf.py MODEL.bin OUT_DIR
"""

from __future__ import annotations

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import write_safetensors  # noqa: E402


def permute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def read_llama2c(path: str):
    with open(path, "rb") as f:
        header = struct.unpack("<7i", f.read(28))
        data = np.frombuffer(f.read(), dtype="<f4")
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = header
    shared = vocab > 0
    vocab = abs(vocab)
    head_size = dim // n_heads
    kv_dim = n_kv_heads * head_size
    offset = 0

    def take(*shape):
        nonlocal offset
        count = int(np.prod(shape))
        if offset + count > data.size:
            raise ValueError(f"{path}: truncated (needs {offset + count} floats, has {data.size})")
        arr = data[offset:offset + count].reshape(shape).astype(np.float32)
        offset += count
        return arr

    w = {"token_embedding": take(vocab, dim), "rms_att": take(n_layers, dim), "wq": take(n_layers, dim, dim),
         "wk": take(n_layers, kv_dim, dim), "wv": take(n_layers, kv_dim, dim), "wo": take(n_layers, dim, dim),
         "rms_ffn": take(n_layers, dim), "w1": take(n_layers, hidden, dim), "w2": take(n_layers, dim, hidden),
         "w3": take(n_layers, hidden, dim), "rms_final": take(dim)}
    take(seq_len, head_size // 2)  # freq_cis_real
    take(seq_len, head_size // 2)  # freq_cis_imag
    w["wcls"] = w["token_embedding"] if shared else take(vocab, dim)
    if offset != data.size:
        raise ValueError(f"{path}: {data.size - offset} trailing floats")
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, vocab=vocab,
               seq_len=seq_len, shared=shared)
    return cfg, w


def convert(bin_path: str, out_dir: str) -> dict:
    cfg, w = read_llama2c(bin_path)
    os.makedirs(out_dir, exist_ok=True)
    tensors = {"model.embed_tokens.weight": w["token_embedding"]}
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = w["rms_att"][i]
        tensors[p + "self_attn.q_proj.weight"] = permute_rows(w["wq"][i], cfg["n_heads"])
        tensors[p + "self_attn.k_proj.weight"] = permute_rows(w["wk"][i], cfg["n_kv_heads"])
        tensors[p + "self_attn.v_proj.weight"] = w["wv"][i]
        tensors[p + "self_attn.o_proj.weight"] = w["wo"][i]
        tensors[p + "post_attention_layernorm.weight"] = w["rms_ffn"][i]
        tensors[p + "mlp.gate_proj.weight"] = w["w1"][i]
        tensors[p + "mlp.down_proj.weight"] = w["w2"][i]
        tensors[p + "mlp.up_proj.weight"] = w["w3"][i]
    tensors["model.norm.weight"] = w["rms_final"]
    if not cfg["shared"]:
        tensors["lm_head.weight"] = w["wcls"]
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": cfg["dim"],
        "intermediate_size": cfg["hidden"],
        "num_hidden_layers": cfg["n_layers"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "vocab_size": cfg["vocab"],
        "max_position_embeddings": cfg["seq_len"],
        "rms_norm_eps": 1e-5,  # llama2.c run.c
        "rope_theta": 10000.0,
        "tie_word_embeddings": cfg["shared"],
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return cfg


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(json.dumps(convert(sys.argv[1], sys.argv[2])))
