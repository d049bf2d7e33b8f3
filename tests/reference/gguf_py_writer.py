#!/usr/bin/env python3
"""Writes a Hugging Face directory of a tiny test model (config.json, model.safetensors, a byte-level BPE
tokenizer.json) as a GGUF file with gguf-py's GGUFWriter (llama.cpp's own writer), in llama.cpp's layout for the
architecture: its tensor names and metadata keys, Llama's q/k rows permuted to the interleaved RoPE order, Gemma's
norm weights stored as 1 + w, and the tokenizer as tokenizer.ggml.* (model "gpt2"). Tests use it to check that minfer
computes the same on a family's GGUF file as on its HF directory, independently of minfer's own GGUF writer.

Supported: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma2, gemma3_text, phi3, smollm3, olmo2, olmo3,
granite, gpt_oss (its experts in f32, as llama.cpp's GptOssModel converter writes a checkpoint that is not MXFP4), and
the hybrids, each a Family of gguf_py_hybrids.py / gguf_py_mamba2.py beside this file: Qwen3.5's text model (qwen3_5
with its text_config, or qwen3_5_text; llama.cpp's qwen35), Qwen3.5-MoE's (qwen3_5_moe or qwen3_5_moe_text;
qwen35moe), Qwen3-Next (qwen3_next; qwen3next), LFM2 (lfm2), LFM2-MoE (lfm2_moe; lfm2moe), Granite 4.0-H
(granitemoehybrid; granitehybrid) and Nemotron-H without MoE layers (nemotron_h).
Usage (project venv): gguf_py_writer.py MODEL_DIR OUT.gguf
"""

from __future__ import annotations

import json
import math
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py_hybrids  # noqa: E402
import gguf_py_mamba2  # noqa: E402
from gguf_py_hybrids import permute_rows  # noqa: E402,F401  (also gguf_py_writer.permute_rows, as before)
from hf_reference import load_hf_tensors  # noqa: E402

# Mistral is written as llama, as llama.cpp's converter does (which has no key for its window: a GGUF Mistral
# attends to the whole context).
# Mixtral too is written as llama (with expert keys), as llama.cpp's converter does.
ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
        "qwen3_moe": "qwen3moe", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3", "smollm3": "smollm3",
        "olmo2": "olmo2", "olmo3": "olmo2", "granite": "granite", "gpt_oss": "gpt-oss"}
# The hybrids: model_type -> its Family class (which names the arch).
HYBRIDS = {**gguf_py_hybrids.FAMILIES, **gguf_py_mamba2.FAMILIES}
# The experts of each MoE layer go into three stacked [experts, rows, cols] tensors, the router into ffn_gate_inp.
EXPERT_NAMES = {"qwen3_moe": ("mlp.", {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps",
                                       "down_proj": "ffn_down_exps"}),
                "mixtral": ("block_sparse_moe.", {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"})}
LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
# Phi-3's fused projections keep their fusion in llama.cpp's layout: attn_qkv, and ffn_up holding gate and up.
PHI3_NAMES = dict(LAYER_NAMES, **{"self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up"})
GEMMA_NAMES = dict(LAYER_NAMES, post_attention_layernorm="post_attention_norm", pre_feedforward_layernorm="ffn_norm",
                   post_feedforward_layernorm="post_ffw_norm")


def gguf_name(hf: str, names: dict) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module...>.weight|bias
    module, kind = ".".join(parts[3:-1]), parts[-1]
    return f"blk.{parts[2]}.{names[module]}.{kind}"


def add_tokenizer(w: gguf.GGUFWriter, model_dir: str, cfg: dict, pre: str | None = None) -> None:
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = dict(tok["model"]["vocab"])
    special = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    vocab.update(special)
    size = int(cfg["vocab_size"])
    by_id = {i: t for t, i in vocab.items()}
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(size)]
    types = [gguf.TokenType.CONTROL if t in special else
             gguf.TokenType.NORMAL if i in by_id else gguf.TokenType.UNUSED for i, t in enumerate(tokens)]
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre or ("qwen2" if "<|im_start|>" in special else "llama-bpe"))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(int(cfg["bos_token_id"]))
    eos = cfg.get("eos_token_id")
    if eos is not None:
        w.add_eos_token_id(int(eos[0] if isinstance(eos, list) else eos))


def stack_experts(tensors: dict, moe: str, names: dict) -> dict:
    """model.layers.N.<moe>experts.J.<proj>.weight -> blk.N.<stacked name>.weight [experts, rows, cols]; the router
    model.layers.N.<moe>gate.weight -> blk.N.ffn_gate_inp.weight. Values are loaders (load_hf_tensors(lazy=True))."""
    out, stacks = {}, {}
    for name, t in tensors.items():
        parts = name.split(".")
        if len(parts) > 4 and ".".join(parts[3:]).startswith(moe + "experts."):
            j, proj = int(parts[3 + moe.count(".") + 1]), parts[-2]
            stacks.setdefault((parts[2], names[proj]), {})[j] = t
        elif name.endswith(moe + "gate.weight") and parts[0] == "model":
            out[f"blk.{parts[2]}.ffn_gate_inp.weight"] = t
        else:
            out[name] = t
    for (layer, stacked), by_expert in stacks.items():
        out[f"blk.{layer}.{stacked}.weight"] = lambda b=by_expert: np.stack([b[j]() for j in sorted(b)])
    return out


def gpt_oss_tensors(tensors: dict) -> dict:
    """As llama.cpp's GptOssModel.modify_tensors for unquantized experts: gate_up_proj [experts, hidden, 2 ff]
    transposed and split by column parity into ffn_gate_exps / ffn_up_exps [experts, ff, hidden] (their biases
    likewise), down_proj transposed into ffn_down_exps; router -> ffn_gate_inp, sinks -> attn_sinks, HF's
    post_attention_layernorm (the pre-FFN norm) -> post_attention_norm. Values are loaders, as stack_experts'."""
    out = {}

    def part(load, pick):
        return lambda: np.ascontiguousarray(pick(load()))

    for name, t in tensors.items():
        parts = name.split(".")
        if parts[0] != "model" or parts[1] != "layers":
            out[name] = t
            continue
        blk, rest = f"blk.{parts[2]}.", ".".join(parts[3:])
        if rest == "mlp.experts.gate_up_proj":
            out[blk + "ffn_gate_exps.weight"] = part(t, lambda a: a.swapaxes(-1, -2)[:, ::2, :])
            out[blk + "ffn_up_exps.weight"] = part(t, lambda a: a.swapaxes(-1, -2)[:, 1::2, :])
        elif rest == "mlp.experts.gate_up_proj_bias":
            out[blk + "ffn_gate_exps.bias"] = part(t, lambda a: a[..., ::2])
            out[blk + "ffn_up_exps.bias"] = part(t, lambda a: a[..., 1::2])
        elif rest == "mlp.experts.down_proj":
            out[blk + "ffn_down_exps.weight"] = part(t, lambda a: a.swapaxes(-1, -2))
        elif rest == "mlp.experts.down_proj_bias":
            out[blk + "ffn_down_exps.bias"] = t
        elif rest.startswith("mlp.router."):
            out[blk + "ffn_gate_inp." + parts[-1]] = t
        elif rest == "self_attn.sinks":
            out[blk + "attn_sinks.weight"] = t
        elif rest == "post_attention_layernorm.weight":
            out[blk + "post_attention_norm.weight"] = t
        else:
            out[name] = t
    return out


def add_common_keys(w: gguf.GGUFWriter, cfg: dict, over: dict) -> None:
    """The keys of every arch: context and embedding length, block count, FFN width (when the config states
    intermediate_size: Qwen3.5-MoE's has none, and llama.cpp's converter then writes no feed_forward_length), head
    counts, key / value length, rope dimension count (head_dim * partial_rotary_factor), RMS epsilon, rope theta; over:
    a hybrid family's values in their place (Family.common; None: the key is not written)."""
    def value(key, default):
        return over[key] if key in over else default()

    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    head_dim = value("head_dim", lambda: int(cfg.get("head_dim") or hidden // heads))
    # transformers 5's rope_parameters (Qwen3.5's) when it holds the theta itself, else the older top-level fields.
    rope = cfg.get("rope_parameters") if "rope_theta" in (cfg.get("rope_parameters") or {}) else cfg
    rot = int(head_dim * float(rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))))
    w.add_context_length(value("context_length", lambda: int(cfg.get("max_position_embeddings", 2048))))
    w.add_embedding_length(hidden)
    w.add_block_count(value("block_count", lambda: int(cfg["num_hidden_layers"])))
    adds = ((w.add_feed_forward_length, value("feed_forward_length",
                                              lambda: int(cfg["intermediate_size"]) if "intermediate_size" in cfg
                                              else None)),
            (w.add_head_count, heads),
            (w.add_head_count_kv, value("head_count_kv", lambda: int(cfg.get("num_key_value_heads") or heads))),
            (w.add_key_length, head_dim), (w.add_value_length, head_dim),
            (w.add_rope_dimension_count, value("rope_dims", lambda: rot)),
            (w.add_layer_norm_rms_eps, value("rms_eps", lambda: float(cfg.get("rms_norm_eps", 1e-6)))),
            (w.add_rope_freq_base, value("rope_theta", lambda: float(rope.get("rope_theta", 10000.0)))))
    for add, v in adds:
        if v is not None:
            add(v)


def add_arch_keys(w: gguf.GGUFWriter, arch: str, cfg: dict, model_dir: str) -> None:
    """The keys of the non-hybrid archs beyond the common ones, as their converters write them."""
    model_type, gemma = cfg["model_type"], cfg["model_type"] in ("gemma2", "gemma3_text")
    if model_type == "gemma2":
        # As llama.cpp's Gemma2Model converter: both caps and the window; no pattern key (llama.cpp alternates).
        w.add_attn_logit_softcapping(float(cfg["attn_logit_softcapping"]))
        w.add_final_logit_softcapping(float(cfg["final_logit_softcapping"]))
        w.add_sliding_window(int(cfg["sliding_window"]))
    elif gemma:
        w.add_sliding_window(int(cfg["sliding_window"]))
        pattern = [t == "sliding_attention" for t in cfg["layer_types"]]
        w.add_array(f"{arch}.attention.sliding_window_pattern", pattern)
        w.add_float32(f"{arch}.rope.freq_base_swa", float(cfg.get("rope_local_base_freq", 10000.0)))
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(float(cfg["final_logit_softcapping"]))
    scaling = cfg.get("rope_scaling")
    kind = scaling.get("rope_type", scaling.get("type")) if scaling else "default"
    if kind in ("longrope", "su") and model_type == "phi3":
        # As llama.cpp's Phi3MiniModel converter: the factors as tensors, the pretrained context and the attention
        # factor as keys.
        original = int(cfg["original_max_position_embeddings"])
        ratio = int(cfg["max_position_embeddings"]) / original
        attn = scaling.get("attention_factor") or (1.0 if ratio <= 1 else
                                                   math.sqrt(1 + math.log(ratio) / math.log(original)))
        w.add_rope_scaling_attn_factors(attn)
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", original)
        w.add_tensor("rope_factors_long.weight", np.array(scaling["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(scaling["short_factor"], dtype=np.float32))
    elif kind == "yarn":
        # As llama.cpp's converter (TextModel.set_gguf_parameters): type, factor, original context, and the betas and
        # attention factor when the config states them.
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(scaling["factor"]))
        w.add_rope_scaling_orig_ctx_len(int(scaling["original_max_position_embeddings"]))
        if scaling.get("attention_factor") is not None:
            w.add_rope_scaling_yarn_attn_factor(float(scaling["attention_factor"]))
        if scaling.get("beta_fast") is not None:
            w.add_rope_scaling_yarn_beta_fast(float(scaling["beta_fast"]))
        if scaling.get("beta_slow") is not None:
            w.add_rope_scaling_yarn_beta_slow(float(scaling["beta_slow"]))
    elif kind != "default":
        raise SystemExit(f"{model_dir}: rope_scaling {scaling} is not written")
    if model_type == "granite":  # as llama.cpp's GraniteModel converter: the multipliers as *_scale keys
        w.add_attention_scale(float(cfg["attention_multiplier"]))
        w.add_embedding_scale(float(cfg["embedding_multiplier"]))
        w.add_residual_scale(float(cfg["residual_multiplier"]))
        w.add_logit_scale(float(cfg["logits_scaling"]))
    if model_type == "olmo3":  # as llama.cpp's Olmo2Model converter: the window and its per-layer pattern
        w.add_sliding_window(int(cfg["sliding_window"]))
        w.add_array(f"{arch}.attention.sliding_window_pattern", [t == "sliding_attention" for t in cfg["layer_types"]])
    if model_type == "gpt_oss":  # as llama.cpp's GptOssModel converter: the window, the experts' count and width
        w.add_sliding_window(int(cfg["sliding_window"]))
        w.add_expert_count(int(cfg["num_local_experts"]))
        w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
        w.add_expert_feed_forward_length(int(cfg["intermediate_size"]))
    if model_type == "phi3" and cfg.get("sliding_window"):
        w.add_sliding_window(int(cfg["sliding_window"]))
    if model_type in EXPERT_NAMES:
        w.add_expert_count(int(cfg["num_experts"] if model_type == "qwen3_moe" else cfg["num_local_experts"]))
        w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
        if model_type == "qwen3_moe":
            w.add_expert_feed_forward_length(int(cfg["moe_intermediate_size"]))


def arch_tensors(arch: str, cfg: dict, tensors: dict) -> dict:
    """The non-hybrid archs' tensors: HF names (gguf_name renames them as they are written), or GGUF names for the
    stacked experts (stack_experts) and gpt-oss's (gpt_oss_tensors)."""
    if cfg["model_type"] in EXPERT_NAMES:
        tensors = stack_experts(tensors, *EXPERT_NAMES[cfg["model_type"]])
    if cfg["model_type"] == "gpt_oss":
        tensors = gpt_oss_tensors(tensors)
    return tensors


def write(model_dir: str, out: str, pre: str | None = None, dtype: str = "f32", experts: str = "") -> None:
    """pre: tokenizer.ggml.pre (llama.cpp's pre-tokenizer name) in place of the one the vocabulary suggests; dtype:
    "f32", or "f16" for the matrices (half the file of a real shape, which llama.cpp's quantizer reads as well);
    experts "mxfp4": stacked expert matrices quantized by gguf-py's MXFP4 quantizer (as gpt-oss's GGUFs hold them).
    Tensors are read, converted and spilled one at a time, so a real shape needs memory for its largest tensor only."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    # A multimodal wrapper's text fields (Qwen3.5's text_config) over its top level, as llama.cpp's converter reads
    # them (a config already flattened reads the same).
    cfg = {**cfg, **(cfg.get("text_config") or {})}
    model_type = cfg["model_type"]
    if model_type not in ARCH and model_type not in HYBRIDS:
        raise SystemExit(f"{model_dir}: model_type {model_type!r} is not supported ({', '.join([*ARCH, *HYBRIDS])})")
    family = HYBRIDS[model_type](cfg) if model_type in HYBRIDS else None
    scaling = cfg.get("rope_scaling") or {}
    if family and scaling.get("rope_type", scaling.get("type", "default")) != "default":
        raise SystemExit(f"{model_dir}: rope_scaling {scaling} is not written for {model_type}")
    arch = family.arch if family else ARCH[model_type]
    w = gguf.GGUFWriter(out, arch, use_temp_file=True)
    add_common_keys(w, cfg, family.common() if family else {})
    if family:
        family.add_keys(w)
    else:
        add_arch_keys(w, arch, cfg, model_dir)
    add_tokenizer(w, model_dir, cfg, pre)
    tensors = load_hf_tensors(model_dir, lazy=True)
    tensors = family.tensors(tensors) if family else arch_tensors(arch, cfg, tensors)
    write_tensors(w, arch, cfg, tensors, dtype, experts)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_tensors(w: gguf.GGUFWriter, arch: str, cfg: dict, tensors: dict, dtype: str, experts: str) -> None:
    """Adds the tensors in name order; HF names renamed (gguf_name), Gemma's norms as 1 + w, Llama's q / k rows
    permuted."""
    model_type, gemma = cfg["model_type"], cfg["model_type"] in ("gemma2", "gemma3_text")
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    # OLMo names its post norms as Gemma does (llama.cpp's post_attention_norm / post_ffw_norm).
    names = GEMMA_NAMES if gemma or model_type in ("olmo2", "olmo3") else PHI3_NAMES if model_type == "phi3" else \
        LAYER_NAMES
    top = ("token_embd.weight", "output_norm.weight", "output.weight", "token_embd_norm.weight")

    # Matrices in f16 when asked; vectors, biases, norms (Granite 4.0-H's 2-D ssm_norm too), convolution kernels and
    # routers f32 (llama.cpp's ssm_conv reads its kernel as f32 only; its converter keeps these, ffn_gate_inp and
    # ffn_gate_inp_shexp included, in f32).
    def stored(name: str, t: np.ndarray) -> np.ndarray:
        f32 = any(k in name for k in ("ssm_conv1d", "shortconv.conv", "ffn_gate_inp")) or name.endswith("_norm.weight")
        return t.astype(np.float16 if dtype == "f16" and t.ndim >= 2 and name.endswith(".weight") and not f32
                        else np.float32)

    for name, load in sorted(tensors.items()):
        t = load().astype(np.float32)
        if name.startswith("blk.") or name in top:  # already in GGUF's names (stacked experts, routers, Qwen3.5's)
            if experts == "mxfp4" and name.endswith("_exps.weight"):
                w.add_tensor(name, gguf.quants.quantize(t, gguf.GGMLQuantizationType.MXFP4),
                             raw_dtype=gguf.GGMLQuantizationType.MXFP4)
            else:
                w.add_tensor(name, stored(name, t))
            continue
        if gemma and name.endswith("norm.weight"):
            t = t + 1.0
        # llama.cpp's LlamaModel converter (SmolLM3Model and GraniteModel derive from it) permutes q/k; no key marks
        # SmolLM3's NoPE layers (llama.cpp: every fourth).
        if arch in ("llama", "smollm3", "granite") and name.endswith(("q_proj.weight", "k_proj.weight")):
            t = permute_rows(t, heads if "q_proj" in name else kv_heads)
        w.add_tensor(gguf_name(name, names), stored(name, t))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    write(sys.argv[1], sys.argv[2])
