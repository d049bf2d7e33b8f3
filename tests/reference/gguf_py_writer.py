#!/usr/bin/env python3
"""Writes a Hugging Face directory of a tiny test model (config.json, model.safetensors, a byte-level BPE
tokenizer.json) as a GGUF file with gguf-py's GGUFWriter (llama.cpp's own writer), in llama.cpp's layout for the
architecture: its tensor names and metadata keys, Llama's q/k rows permuted to the interleaved RoPE order, Gemma's
norm weights stored as 1 + w, and the tokenizer as tokenizer.ggml.* (model "gpt2"). Tests use it to check that minfer
computes the same on a family's GGUF file as on its HF directory, independently of minfer's own GGUF writer.

Supported: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma2, gemma3_text, phi3, smollm3, olmo2, olmo3,
granite, gpt_oss (its experts in f32, as llama.cpp's GptOssModel converter writes a checkpoint that is not MXFP4), and
Qwen3.5's text model (qwen3_5 with its text_config, or qwen3_5_text; llama.cpp's qwen35, as its Qwen3_5TextModel
converter writes it: see qwen35_tensors), Qwen3.5-MoE's (qwen3_5_moe or qwen3_5_moe_text; llama.cpp's qwen35moe, as
its Qwen3_5MoeTextModel converter writes it: qwen35_tensors and qwen35_moe_tensors), and LFM2 (lfm2, as llama.cpp's
LFM2Model converter writes it: see lfm2_fields and lfm2_tensors), and Granite 4.0-H (granitemoehybrid; llama.cpp's
granitehybrid, as its GraniteHybridModel converter writes it: see granite_hybrid_fields and granite_hybrid_tensors).
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
from hf_reference import load_hf_tensors  # noqa: E402

# Mistral is written as llama, as llama.cpp's converter does (which has no key for its window: a GGUF Mistral
# attends to the whole context).
# Mixtral too is written as llama (with expert keys), as llama.cpp's converter does.
ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
        "qwen3_moe": "qwen3moe", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3", "smollm3": "smollm3",
        "olmo2": "olmo2", "olmo3": "olmo2", "granite": "granite", "gpt_oss": "gpt-oss", "qwen3_5": "qwen35",
        "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe", "qwen3_5_moe_text": "qwen35moe", "lfm2": "lfm2",
        "granitemoehybrid": "granitehybrid"}
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


def permute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf LlamaModel.permute: HF's half-split rows -> Meta's interleaved pairs."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


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


# Qwen3.5's layers in llama.cpp's names (its Gated DeltaNet layers' are in qwen35_tensors).
QWEN35_NAMES = dict(LAYER_NAMES, post_attention_layernorm="post_attention_norm")
QWEN35_LINEAR_NAMES = {"in_proj_qkv.weight": "attn_qkv.weight", "in_proj_z.weight": "attn_gate.weight",
                       "in_proj_b.weight": "ssm_beta.weight", "in_proj_a.weight": "ssm_alpha.weight",
                       "conv1d.weight": "ssm_conv1d.weight", "A_log": "ssm_a", "dt_bias": "ssm_dt.bias",
                       "norm.weight": "ssm_norm.weight", "out_proj.weight": "ssm_out.weight"}
# Only a text model is written: the vision tower of Qwen3_5ForConditionalGeneration is left out, as llama.cpp's text
# converter leaves it out (it goes into an mmproj file); the MTP layers are left out too (llama.cpp's converter
# appends them as extra blocks with nextn_predict_layers, which this writer does not).
QWEN35_SKIPPED = ("model.visual.", "mtp.", "model.mtp.")


def tiled_v_heads(t: np.ndarray, axis: int, k_heads: int, v_heads: int, head_dim: int) -> np.ndarray:
    """llama.cpp's _LinearAttentionVReorderBase._reorder_v_heads: the value heads along `axis` from HF's order,
    grouped by key head [k0v0, k0v1, ..., k1v0, k1v1, ...], to the tiled order ggml broadcasts in
    [k0v0, k1v0, ..., k0v1, k1v1, ...]; each head head_dim wide."""
    t = np.moveaxis(t, axis, 0)
    rest = t.shape[1:]
    t = t.reshape(k_heads, v_heads // k_heads, head_dim, *rest).swapaxes(0, 1).reshape(v_heads * head_dim, *rest)
    return np.ascontiguousarray(np.moveaxis(t, 0, axis))


# Qwen3.5-MoE's feed-forward block in llama.cpp's names (gguf-py's tensor_mapping, as Qwen2MoeModel maps them): the
# router, the shared expert and the shared expert's gate (the routed experts are stacked: qwen35_moe_tensors).
QWEN35_MOE_NAMES = {"mlp.gate.weight": "ffn_gate_inp.weight",
                    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
                    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
                    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
                    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight"}
QWEN35_EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


def qwen35_moe_tensors(blk: str, rest: str, load, out: dict, stacks: dict) -> bool:
    """Qwen3.5-MoE's feed-forward tensors of one layer (blk "blk.N.", rest the HF name after model.layers.N.), as
    llama.cpp's Qwen2MoeModel.modify_tensors (which Qwen3_5MoeTextModel inherits): per-expert
    mlp.experts.J.{gate,up,down}_proj.weight collected into `stacks` (stacked over J into ffn_{gate,up,down}_exps
    [experts, rows, cols] by the caller); transformers 5's stacked mlp.experts.gate_up_proj [experts, 2 ff, hidden]
    split in halves (gate first) along its rows, mlp.experts.down_proj [experts, hidden, ff] kept; the router and the
    shared expert renamed (QWEN35_MOE_NAMES), the shared expert's gate kept [1, hidden] as the converter writes it
    (llama.cpp loads it as {hidden}). False for a tensor that is not the MoE block's."""
    if rest in QWEN35_MOE_NAMES:
        out[blk + QWEN35_MOE_NAMES[rest]] = load
    elif rest.startswith("mlp.experts.") and rest.count(".") == 4:  # mlp.experts.J.<proj>.weight
        _, _, j, proj, _ = rest.split(".")
        stacks.setdefault(blk + QWEN35_EXPERT_NAMES[proj] + ".weight", {})[int(j)] = load
    elif rest in ("mlp.experts.gate_up_proj", "mlp.experts.gate_up_proj.weight"):
        def half(second):
            def f():
                a = load()
                ff = a.shape[-2] // 2
                return np.ascontiguousarray(a[..., ff:, :] if second else a[..., :ff, :])
            return f
        out[blk + "ffn_gate_exps.weight"], out[blk + "ffn_up_exps.weight"] = half(False), half(True)
    elif rest in ("mlp.experts.down_proj", "mlp.experts.down_proj.weight"):
        out[blk + "ffn_down_exps.weight"] = load
    else:
        return False
    return True


def qwen35_tensors(tensors: dict, cfg: dict) -> dict:
    """As llama.cpp's Qwen3_5TextModel converter (Qwen3NextModel.modify_tensors under _LinearAttentionVReorderBase's):
    model.language_model.* (or model.*) to GGUF names; the value heads of every Gated DeltaNet tensor reordered from
    grouped to tiled (in_proj_qkv's V rows, in_proj_z's rows, in_proj_a/b's rows, A_log, dt_bias, conv1d's V channels,
    out_proj's columns; only when there are more value heads than key heads); A_log stored as ssm_a = -exp(A_log),
    dt_bias as ssm_dt.bias, conv1d [channels, 1, kernel] squeezed to [channels, kernel]; every RMSNorm weight but the
    delta rule's (linear_attn.norm) stored as 1 + w (the attention's q/k norms, the layer norms, the final norm).
    q_proj stays as it is: attn_q holds each head's query rows then its gate rows (2x rows), as llama.cpp loads it.
    Qwen3.5-MoE's feed-forward block as qwen35_moe_tensors writes it.
    Values are loaders, as stack_experts'."""
    hk, hv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
    dk, dv = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"])
    reorder = hk != hv
    out, stacks = {}, {}

    def conv(name, load, fn):
        out[name] = lambda: np.ascontiguousarray(fn(load().astype(np.float32)))

    for name, load in tensors.items():
        if name.startswith(QWEN35_SKIPPED):
            continue
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        elif name.startswith("lm_head."):
            pass
        elif not name.startswith("model."):
            raise SystemExit(f"unexpected Qwen3.5 tensor {name}")
        if name == "model.embed_tokens.weight":
            out["token_embd.weight"] = load
            continue
        if name == "model.norm.weight":
            conv("output_norm.weight", load, lambda a: a + 1)
            continue
        if name == "lm_head.weight":
            out["output.weight"] = load
            continue
        parts = name.split(".")  # model.layers.N.<module...>.weight
        blk, rest = f"blk.{parts[2]}.", ".".join(parts[3:])
        if cfg.get("num_experts") and qwen35_moe_tensors(blk, rest, load, out, stacks):
            continue
        if rest.startswith("linear_attn."):
            key = rest[len("linear_attn."):]
            gguf_key = blk + QWEN35_LINEAR_NAMES[key]
            qk = 2 * hk * dk

            def v_rows(a, axis=0, width=dv):
                return tiled_v_heads(a, axis, hk, hv, width) if reorder else a

            if key == "in_proj_qkv.weight":
                conv(gguf_key, load, lambda a: np.concatenate([a[:qk], v_rows(a[qk:])]))
            elif key == "in_proj_z.weight":
                conv(gguf_key, load, v_rows)
            elif key in ("in_proj_a.weight", "in_proj_b.weight", "dt_bias"):
                conv(gguf_key, load, lambda a: v_rows(a, 0, 1))
            elif key == "A_log":
                conv(gguf_key, load, lambda a: -np.exp(v_rows(a, 0, 1)))
            elif key == "conv1d.weight":
                conv(gguf_key, load, lambda a: (lambda c: np.concatenate([c[:qk], v_rows(c[qk:])]))(
                    a.reshape(a.shape[0], a.shape[-1])))
            elif key == "out_proj.weight":
                conv(gguf_key, load, lambda a: v_rows(a, 1))
            else:  # norm.weight: the delta rule's gated norm, stored as it is
                out[gguf_key] = load
            continue
        if rest.endswith("norm.weight"):
            conv(blk + QWEN35_NAMES[rest[:-len(".weight")]] + ".weight", load, lambda a: a + 1)
        else:
            out[blk + QWEN35_NAMES[rest[:-len(".weight")]] + ".weight"] = load
    experts = int(cfg.get("num_experts") or 0)
    for stacked, by_expert in stacks.items():
        if sorted(by_expert) != list(range(experts)):
            raise SystemExit(f"{stacked}: experts {sorted(by_expert)} of {experts}")
        out[stacked] = lambda b=by_expert: np.stack([b[j]() for j in sorted(b)])
    return out


def add_qwen35_keys(w: gguf.GGUFWriter, arch: str, cfg: dict) -> None:
    """As llama.cpp's Qwen3NextModel / _Qwen35MRopeMixin set_gguf_parameters: the delta rule's shape (ssm.*), which
    layers are recurrent (attention.recurrent_layers, from layer_types) and the interval, and mRoPE's sections
    (rope_parameters.mrope_section padded to 4, else llama.cpp's default [11, 11, 10, 0])."""
    hv = int(cfg["linear_num_value_heads"])
    w.add_ssm_conv_kernel(int(cfg["linear_conv_kernel_dim"]))
    w.add_ssm_state_size(int(cfg["linear_key_head_dim"]))
    w.add_ssm_group_count(int(cfg["linear_num_key_heads"]))
    w.add_ssm_time_step_rank(hv)
    w.add_ssm_inner_size(int(cfg["linear_value_head_dim"]) * hv)
    if cfg.get("layer_types") is not None:
        w.add_array(f"{arch}.attention.recurrent_layers", [t == "linear_attention" for t in cfg["layer_types"]])
    w.add_full_attention_interval(int(cfg.get("full_attention_interval", 4)))
    sections = list((cfg.get("rope_parameters") or {}).get("mrope_section") or [11, 11, 10, 0])
    w.add_rope_dimension_sections((sections + [0] * 4)[:4])


# LFM2's tensors in llama.cpp's names (LFM2Model: gguf-py's tensor_mapping for MODEL_ARCH.LFM2). The final norm
# model.embedding_norm becomes token_embd_norm (llama.cpp loads it as the output norm, LLM_TENSOR_OUTPUT_NORM_LFM2).
LFM2_NAMES = {"operator_norm": "attn_norm", "ffn_norm": "ffn_norm", "feed_forward.w1": "ffn_gate",
              "feed_forward.w3": "ffn_up", "feed_forward.w2": "ffn_down", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.out_proj": "attn_output",
              "self_attn.q_layernorm": "attn_q_norm", "self_attn.k_layernorm": "attn_k_norm",
              "conv.conv": "shortconv.conv", "conv.in_proj": "shortconv.in_proj", "conv.out_proj": "shortconv.out_proj"}


def lfm2_fields(cfg: dict) -> dict:
    """What llama.cpp's converter reads of an LFM2 config after transformers' Lfm2Config has normalised it (the
    converter loads config.json through AutoConfig): the legacy block_ff_dim / tie_embedding keys win over
    intermediate_size / tie_word_embeddings, layer_types falls back to full_attn_idxs (else every layer attention),
    rope_theta to 1e6. The FFN width as LFM2Model._add_feed_forward_length: int(2 I / 3), times the multiplier when
    not null, rounded up to block_multiple_of (which transformers skips when the multiplier is null)."""
    layers = int(cfg["num_hidden_layers"])
    types = cfg.get("layer_types")
    if types is None:
        idxs = cfg.get("full_attn_idxs")
        idxs = set(range(layers) if idxs is None else idxs)
        types = ["full_attention" if i in idxs else "conv" for i in range(layers)]
    ff = int(cfg.get("block_ff_dim", cfg.get("intermediate_size", 12288)))
    if cfg.get("block_auto_adjust_ff_dim", True):
        ff = int(2 * ff / 3)
        mult, multiple_of = cfg.get("block_ffn_dim_multiplier", 1.0), int(cfg.get("block_multiple_of", 256))
        if mult is not None:
            ff = int(mult * ff)
        ff = multiple_of * ((ff + multiple_of - 1) // multiple_of)
    rope = cfg.get("rope_parameters") or {}
    tied = bool(cfg.get("tie_embedding", cfg.get("tie_word_embeddings", True)))
    return {"layer_types": types, "ff": ff, "tied": tied,
            "theta": float(rope.get("rope_theta", cfg.get("rope_theta", 1e6))), "eps": float(cfg.get("norm_eps", 1e-5)),
            "kv": int(cfg.get("num_key_value_heads", 8)), "l_cache": int(cfg.get("conv_L_cache", 3))}


def lfm2_tensors(tensors: dict, tied: bool) -> dict:
    """As LFM2Model.modify_tensors: HF names to llama.cpp's (LFM2_NAMES), conv.conv.weight [H, 1, L] squeezed to
    [H, L]; a tied checkpoint's lm_head.weight left out (llama.cpp reuses token_embd). Conv biases (conv_bias true) are
    refused: llama.cpp's LFM2 graph has none and would not load the file. Values are loaders, as stack_experts'."""
    out = {}
    for name, load in tensors.items():
        if name == "model.embed_tokens.weight":
            out["token_embd.weight"] = load
        elif name == "model.embedding_norm.weight":
            out["token_embd_norm.weight"] = load
        elif name == "lm_head.weight":
            if not tied:
                out["output.weight"] = load
        elif name.endswith(".bias"):
            raise SystemExit(f"LFM2 tensor {name}: llama.cpp's lfm2 has no biases (conv_bias must be false)")
        else:
            parts = name.split(".")  # model.layers.N.<module...>.weight
            if parts[:2] != ["model", "layers"] or parts[-1] != "weight":
                raise SystemExit(f"unexpected LFM2 tensor {name}")
            gguf_key = f"blk.{parts[2]}.{LFM2_NAMES['.'.join(parts[3:-1])]}.weight"
            squeeze = parts[-3:-1] == ["conv", "conv"]  # the depthwise kernel [H, 1, L] -> [H, L]
            out[gguf_key] = (lambda ld=load: (lambda a: a.reshape(a.shape[0], -1))(ld())) if squeeze else load
    return out


# Granite 4.0-H's tensors in llama.cpp's names (gguf-py's tensor_mapping for MODEL_ARCH.GRANITE_HYBRID).
GRANITE_HYBRID_NAMES = {"input_layernorm.weight": "attn_norm.weight",
                        "post_attention_layernorm.weight": "ffn_norm.weight", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                        "self_attn.o_proj": "attn_output", "mamba.in_proj.weight": "ssm_in.weight",
                        "mamba.conv1d.weight": "ssm_conv1d.weight", "mamba.conv1d.bias": "ssm_conv1d.bias",
                        "mamba.dt_bias": "ssm_dt.bias", "mamba.A_log": "ssm_a", "mamba.D": "ssm_d",
                        "mamba.norm.weight": "ssm_norm.weight", "mamba.out_proj.weight": "ssm_out.weight",
                        "block_sparse_moe.router.layer.weight": "ffn_gate_inp.weight",
                        "block_sparse_moe.output_linear.weight": "ffn_down_exps.weight"}


def granite_hybrid_fields(cfg: dict) -> dict:
    """What llama.cpp's GraniteHybridModel converter reads of a Granite 4.0-H config: the attention layers (its
    converter counts only the legacy name "attention"; transformers 5 writes "full_attention", taken here too), the
    Mamba-2 shape (d_inner = mamba_expand * hidden, heads, groups, state, kernel), whether there are routed experts.
    Refused: a vocabulary that is not a multiple of 8 (the converter pads the token list to one, token_embd keeps the
    checkpoint's rows, and llama.cpp would not load the file), in_proj / out_proj biases (llama.cpp loads none)."""
    layers = int(cfg["num_hidden_layers"])
    types = cfg.get("layer_types") or cfg.get("layers_block_type") or ["mamba"] * layers
    attn = [t in ("attention", "full_attention") for t in types]
    if int(cfg["vocab_size"]) % 8:
        raise SystemExit(f"granitehybrid: vocab_size {cfg['vocab_size']} is not a multiple of 8")
    if cfg.get("mamba_proj_bias"):
        raise SystemExit("granitehybrid: llama.cpp loads no ssm_in / ssm_out biases (mamba_proj_bias must be false)")
    return {"attn": attn, "d_inner": int(cfg.get("mamba_expand", 2)) * int(cfg["hidden_size"]),
            "heads": int(cfg.get("mamba_n_heads", 128)), "groups": int(cfg.get("mamba_n_groups", 1)),
            "d_state": int(cfg.get("mamba_d_state", 256)), "d_conv": int(cfg.get("mamba_d_conv", 4)),
            "experts": int(cfg.get("num_local_experts") or 0)}


def add_granite_hybrid_keys(w: gguf.GGUFWriter, cfg: dict, g: dict) -> None:
    """As GraniteHybridModel.set_gguf_parameters beyond the common keys: the multipliers as *_scale keys (only those
    the config states and that are non-zero), the experts' counts (always) and the shared width, the ssm.* shape
    (time_step_rank = the SSM heads), head_count_kv per layer (0 marks a Mamba layer), rope.scaling.finetuned false
    (llama.cpp's switch for RoPE: off for every granitemoehybrid with Mamba layers, whatever position_embedding_type
    says), the vocabulary size and the rope dimension count (hidden / heads, as LlamaModel's)."""
    for key, add in (("attention_multiplier", w.add_attention_scale), ("embedding_multiplier", w.add_embedding_scale),
                     ("residual_multiplier", w.add_residual_scale), ("logits_scaling", w.add_logit_scale)):
        if cfg.get(key):
            add(float(cfg[key]))
    w.add_expert_count(g["experts"])
    w.add_expert_used_count(int(cfg.get("num_experts_per_tok") or 0))
    if cfg.get("shared_intermediate_size"):
        w.add_expert_shared_feed_forward_length(int(cfg["shared_intermediate_size"]))
    w.add_ssm_conv_kernel(g["d_conv"])
    w.add_ssm_state_size(g["d_state"])
    w.add_ssm_group_count(g["groups"])
    w.add_ssm_inner_size(g["d_inner"])
    w.add_ssm_time_step_rank(g["heads"])
    w.add_rope_scaling_finetuned(False)
    w.add_vocab_size(int(cfg["vocab_size"]))


def granite_hybrid_tensors(tensors: dict, cfg: dict, g: dict) -> dict:
    """As GraniteHybridModel.modify_tensors (Mamba2Model's for the Mamba layers, GraniteMoeModel's / LlamaModel's for
    the rest): HF names to llama.cpp's (GRANITE_HYBRID_NAMES); conv1d [ch, 1, K] squeezed to [ch, K]; A_log stored as
    ssm_a = -exp(A_log) [heads, 1], D as [heads, 1], the gated norm's weight as [groups, d_inner / groups]; q / k rows
    (and biases) permuted as LlamaModel.permute (NoPE makes that immaterial); block_sparse_moe.input_linear [E, 2 I, H]
    split by rows into ffn_gate_exps | ffn_up_exps, shared_mlp.input_linear [2 Is, H] into ffn_gate_shexp |
    ffn_up_shexp (ffn_gate | ffn_up with no routed experts; output_linear likewise ffn_down_shexp or ffn_down);
    transformers 5's in-memory spellings (experts.gate_up_proj / down_proj, router.weight) are read too. Values are
    loaders, as stack_experts'."""
    heads, kv = int(cfg["num_attention_heads"]), int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    shexp = "_shexp" if g["experts"] else ""
    out = {}

    def conv(name, load, fn):
        out[name] = lambda: np.ascontiguousarray(fn(load().astype(np.float32)))

    def halves(blk, load, first, second):
        conv(blk + first, load, lambda a: a[..., :a.shape[-2] // 2, :])
        conv(blk + second, load, lambda a: a[..., a.shape[-2] // 2:, :])

    for name, load in tensors.items():
        top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
               "lm_head.weight": "output.weight"}
        if name in top:
            out[top[name]] = load
            continue
        parts = name.split(".")
        if parts[:2] != ["model", "layers"]:
            raise SystemExit(f"unexpected Granite 4.0-H tensor {name}")
        blk, rest = f"blk.{parts[2]}.", ".".join(parts[3:])
        rest = {"block_sparse_moe.experts.down_proj": "block_sparse_moe.output_linear.weight",
                "block_sparse_moe.router.weight": "block_sparse_moe.router.layer.weight",
                "block_sparse_moe.experts.gate_up_proj": "block_sparse_moe.input_linear.weight"}.get(rest, rest)
        if rest == "block_sparse_moe.input_linear.weight":
            halves(blk, load, "ffn_gate_exps.weight", "ffn_up_exps.weight")
        elif rest == "shared_mlp.input_linear.weight":
            halves(blk, load, f"ffn_gate{shexp}.weight", f"ffn_up{shexp}.weight")
        elif rest == "shared_mlp.output_linear.weight":
            out[blk + f"ffn_down{shexp}.weight"] = load
        elif rest.startswith("self_attn."):
            module, kind = rest.rsplit(".", 1)
            n = heads if module.endswith("q_proj") else kv
            permute = module.endswith(("q_proj", "k_proj"))
            conv(f"{blk}{GRANITE_HYBRID_NAMES[module]}.{kind}", load,
                 (lambda a, n=n: permute_rows(a, n)) if permute else (lambda a: a))
        elif rest == "mamba.conv1d.weight":
            conv(blk + "ssm_conv1d.weight", load, lambda a: a.reshape(a.shape[0], a.shape[-1]))
        elif rest == "mamba.A_log":
            conv(blk + "ssm_a", load, lambda a: -np.exp(a).reshape(-1, 1))
        elif rest == "mamba.D":
            conv(blk + "ssm_d", load, lambda a: a.reshape(-1, 1))
        elif rest == "mamba.norm.weight":
            conv(blk + "ssm_norm.weight", load, lambda a: a.reshape(g["groups"], -1))
        else:
            out[blk + GRANITE_HYBRID_NAMES[rest]] = load
    return out


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
    if model_type not in ARCH:
        raise SystemExit(f"{model_dir}: model_type {model_type!r} is not supported ({', '.join(ARCH)})")
    arch, gemma = ARCH[model_type], model_type in ("gemma2", "gemma3_text")
    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    w = gguf.GGUFWriter(out, arch, use_temp_file=True)
    granite_h = granite_hybrid_fields(cfg) if arch == "granitehybrid" else None
    # Granite 4.0-H: NoPE, and its converter then writes 2**20 as the context length.
    w.add_context_length(2 ** 20 if granite_h else int(cfg.get("max_position_embeddings", 2048)))
    w.add_embedding_length(hidden)
    w.add_block_count(int(cfg["num_hidden_layers"]))
    lfm2 = lfm2_fields(cfg) if arch == "lfm2" else None
    # LFM2: the adjusted FFN width, and head_count_kv per layer with 0 marking the conv layers (as its converter).
    # Qwen3.5-MoE's configs have no intermediate_size, and llama.cpp's converter then writes no feed_forward_length.
    if lfm2 or "intermediate_size" in cfg:
        w.add_feed_forward_length(lfm2["ff"] if lfm2 else int(cfg["intermediate_size"]))
    w.add_head_count(heads)
    if granite_h:  # 0 marks the Mamba layers
        w.add_head_count_kv([kv_heads if a else 0 for a in granite_h["attn"]])
    else:
        w.add_head_count_kv([lfm2["kv"] if t != "conv" else 0 for t in lfm2["layer_types"]] if lfm2 else kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    # transformers 5's rope_parameters (Qwen3.5's) when it holds the theta itself, else the older top-level fields.
    rope = cfg.get("rope_parameters") if "rope_theta" in (cfg.get("rope_parameters") or {}) else cfg
    rot = int(head_dim * float(rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))))
    w.add_rope_dimension_count(rot)
    w.add_layer_norm_rms_eps(lfm2["eps"] if lfm2 else float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_rope_freq_base(lfm2["theta"] if lfm2 else float(rope.get("rope_theta", 10000.0)))
    if lfm2:  # as LFM2Model.set_gguf_parameters: the vocabulary size and the conv kernel length
        w.add_vocab_size(int(cfg["vocab_size"]))
        w.add_shortconv_l_cache(lfm2["l_cache"])
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
        attn = scaling.get("attention_factor") or (1.0 if ratio <= 1 else math.sqrt(1 + math.log(ratio) / math.log(original)))
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
    if granite_h:
        add_granite_hybrid_keys(w, cfg, granite_h)
    if model_type == "olmo3":  # as llama.cpp's Olmo2Model converter: the window and its per-layer pattern
        w.add_sliding_window(int(cfg["sliding_window"]))
        w.add_array(f"{arch}.attention.sliding_window_pattern", [t == "sliding_attention" for t in cfg["layer_types"]])
    if model_type == "gpt_oss":  # as llama.cpp's GptOssModel converter: the window, the experts' count and width
        w.add_sliding_window(int(cfg["sliding_window"]))
        w.add_expert_count(int(cfg["num_local_experts"]))
        w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
        w.add_expert_feed_forward_length(int(cfg["intermediate_size"]))
    if arch in ("qwen35", "qwen35moe"):
        add_qwen35_keys(w, arch, cfg)
    if arch == "qwen35moe":  # as Qwen2MoeModel.set_gguf_parameters (the counts from TextModel's)
        w.add_expert_count(int(cfg["num_experts"]))
        w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
        w.add_expert_feed_forward_length(int(cfg["moe_intermediate_size"]))
        if cfg.get("shared_expert_intermediate_size") is not None:
            w.add_expert_shared_feed_forward_length(int(cfg["shared_expert_intermediate_size"]))
    if model_type == "phi3" and cfg.get("sliding_window"):
        w.add_sliding_window(int(cfg["sliding_window"]))
    if model_type in EXPERT_NAMES:
        experts = int(cfg["num_experts"] if model_type == "qwen3_moe" else cfg["num_local_experts"])
        w.add_expert_count(experts)
        w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
        if model_type == "qwen3_moe":
            w.add_expert_feed_forward_length(int(cfg["moe_intermediate_size"]))
    add_tokenizer(w, model_dir, cfg, pre)
    # OLMo names its post norms as Gemma does (llama.cpp's post_attention_norm / post_ffw_norm).
    names = GEMMA_NAMES if gemma or model_type in ("olmo2", "olmo3") else PHI3_NAMES if model_type == "phi3" else \
        LAYER_NAMES
    tensors = load_hf_tensors(model_dir, lazy=True)
    if model_type in EXPERT_NAMES:
        tensors = stack_experts(tensors, *EXPERT_NAMES[model_type])
    if model_type == "gpt_oss":
        tensors = gpt_oss_tensors(tensors)
    if arch in ("qwen35", "qwen35moe"):
        tensors = qwen35_tensors(tensors, cfg)
    if lfm2:
        tensors = lfm2_tensors(tensors, lfm2["tied"])
    if granite_h:
        tensors = granite_hybrid_tensors(tensors, cfg, granite_h)
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
        # llama.cpp's LlamaModel converter (SmolLM3Model and GraniteModel derive from it) permutes q/k; no key marks SmolLM3's NoPE
        # layers (llama.cpp: every fourth).
        if arch in ("llama", "smollm3", "granite") and name.endswith(("q_proj.weight", "k_proj.weight")):
            t = permute_rows(t, heads if "q_proj" in name else kv_heads)
        w.add_tensor(gguf_name(name, names), stored(name, t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    write(sys.argv[1], sys.argv[2])
