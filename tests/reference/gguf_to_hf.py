#!/usr/bin/env python3
"""Converts a Llama- or Gemma 3-architecture GGUF file (any quantization types) into a Hugging Face directory
(config.json + model.safetensors, f32) with gguf-py, llama.cpp's own reader and numpy dequantizers, independently of
minfer, so that hf_reference.py can run the model on the dequantized weights.

Llama: GGUF stores the rows of attn_q / attn_k in Meta's interleaved RoPE order (llama.cpp's converter permutes HF's
rows: w.reshape(heads, 2, rows / heads / 2, cols).swapaxes(1, 2)); this undoes it so that HF's rotate_half applies.
Gemma 3: llama.cpp's converter stores every norm weight as 1 + w (Gemma's RMSNorm multiplies by 1 + w); this
subtracts the 1 again. Its defaults (llama.cpp's src/models/gemma3.cpp) fill what the metadata leaves out: every
6th layer global, local RoPE base 10000, query_pre_attn_scalar = head_dim.

Usage (in the project venv): gguf_to_hf.py MODEL.gguf OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import write_safetensors  # noqa: E402

NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
         "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def unpermute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}


def dequantized(reader: gguf.GGUFReader):
    """(GGUF name, HF name for the global tensors or None, f32 array in HF's [rows, cols] shape) per tensor."""
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        yield t.name, GLOBAL_NAMES.get(t.name), w


def write_hf_dir(out_dir: str, config: dict, tensors: dict) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)


def field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


GEMMA3_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
                "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
                "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def convert_gemma3(reader: gguf.GGUFReader, out_dir: str) -> None:
    tensors = {}
    for name, hf, w in dequantized(reader):
        if name.endswith("norm.weight"):
            w = w - 1.0
        parts = name.split(".")
        tensors[hf or f"model.layers.{parts[1]}.{GEMMA3_NAMES[parts[2]]}.weight"] = w
    a = "gemma3."
    layers = int(field(reader, a + "block_count"))
    heads = int(field(reader, a + "attention.head_count"))
    head_dim = int(field(reader, a + "attention.key_length"))
    config = {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "hidden_size": int(field(reader, a + "embedding_length")),
        "intermediate_size": int(field(reader, a + "feed_forward_length")), "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": int(field(reader, a + "attention.head_count_kv", heads)),
        "head_dim": head_dim, "query_pre_attn_scalar": head_dim,
        "rms_norm_eps": float(field(reader, a + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field(reader, a + "rope.freq_base", 1000000.0)),
        "rope_local_base_freq": float(field(reader, a + "rope.freq_base_swa", 10000.0)),
        "sliding_window": int(field(reader, a + "attention.sliding_window")),
        "layer_types": ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)],
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": field(reader, a + "final_logit_softcapping"),
        "vocab_size": int(tensors["model.embed_tokens.weight"].shape[0]),
        "tie_word_embeddings": "lm_head.weight" not in tensors, "torch_dtype": "float32",
    }
    write_hf_dir(out_dir, config, tensors)


def convert(path: str, out_dir: str) -> None:
    reader = gguf.GGUFReader(path)
    arch = field(reader, "general.architecture")
    if arch == "gemma3":
        return convert_gemma3(reader, out_dir)
    if arch != "llama":
        raise SystemExit(f"{path}: architecture {arch!r}, only llama and gemma3 are converted")
    heads = int(field(reader, "llama.attention.head_count"))
    kv_heads = int(field(reader, "llama.attention.head_count_kv", heads))
    tensors = {}
    for name, hf, w in dequantized(reader):
        parts = name.split(".")
        if hf:
            tensors[hf] = w
        elif parts[0] == "blk":
            kind = parts[2]
            if kind == "attn_q":
                w = unpermute_rows(w, heads)
            elif kind == "attn_k":
                w = unpermute_rows(w, kv_heads)
            tensors[f"model.layers.{parts[1]}.{NAMES[kind]}.weight"] = w
        else:
            raise SystemExit(f"{path}: unexpected tensor {name}")
    hidden = int(field(reader, "llama.embedding_length"))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")), "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "rms_norm_eps": float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field(reader, "llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(reader, "llama.context_length", 2048)),
        "vocab_size": int(tensors["model.embed_tokens.weight"].shape[0]),
        "tie_word_embeddings": "lm_head.weight" not in tensors, "torch_dtype": "float32",
    }
    write_hf_dir(out_dir, config, tensors)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(sys.argv[1], sys.argv[2])
