#!/usr/bin/python3
"""An independent PyTorch oracle for minfer: Hugging Face Llama (Llama 2 / 3, incl. rope_type "llama3"), Qwen2,
Qwen3, Gemma 2 and Gemma 3 (text), written from scratch after the published HF modeling code (modeling_llama.py,
modeling_qwen2.py, modeling_qwen3.py, modeling_gemma2.py, modeling_gemma3.py, modeling_rope_utils.py), reading an HF
model directory with its own small safetensors reader.

Numerics: weights as stored, upcast to float32 (BF16 -> F32 is exact), every computation in float32 — the engine's
numerics too. This is not HF's bf16 forward (HF would keep bf16 activations); it is the f32 computation on the
checkpoint's values.

Semantics followed (HF eager attention path):
  h = embed_tokens[ids]
  per layer: h = h + o_proj(attn(input_layernorm(h))); h = h + down(silu(gate(x)) * up(x)), x = post_attention_layernorm(h)
  RMSNorm: w * (x * rsqrt(mean(x^2) + eps)), in f32
  RoPE: rotate_half (half-split, "NeoX") form, inv_freq = 1 / theta^(arange(0, d, 2) / d), optional llama3 scaling
        exactly as _compute_llama3_parameters, linear, or yarn as _compute_yarn_parameters (cos/sin times its
        attention factor); cos/sin of position * inv_freq in f32
  attention: GQA via repeat_kv (query head h reads KV head h // (heads / kv_heads)), scores * head_dim^-0.5,
        causal mask, softmax in f32
  Qwen2: q/k/v projections have biases; Llama: biases only if attention_bias / mlp_bias (present in the file)
  Qwen3: no q/k/v biases; q and k each RMSNorm-ed over head_dim (q_norm / k_norm, one [head_dim] weight shared by the
        heads) after the projection and before RoPE; head_dim from the config (not hidden / heads)
  lm_head: lm_head.weight, or embed_tokens when tie_word_embeddings
  Phi-3 (Phi3ForCausalLM): qkv_proj rows are [q | k | v], gate_up_proj rows [gate | up]; RoPE on the first
        head_dim * partial_rotary_factor dims only; longrope (rope_scaling type "longrope" / "su", as
        _compute_longrope_parameters): inv_freq = 1 / (ext * theta^(arange(0, rot, 2) / rot)) with ext = long_factor
        when the context is long (Reference.long_context, which the test sets to the engine's choice; HF switches
        when the sequence passes original_max_position_embeddings) else short_factor, cos and sin times
        attention_factor (default sqrt(1 + ln(max_pos / original) / ln(original))); sliding window on every layer
  Qwen3-MoE / Mixtral: the MLP of each MoE layer is softmax(router(x)) in f32, the top num_experts_per_tok
        experts (torch.topk), their weights renormalised when norm_topk_prob (Mixtral: always), and the sum over
        experts e in order of weight_e * down_e(silu(gate_e(x)) * up_e(x)) (index_add, as the HF blocks do)
  Mistral: Llama's maths; with sliding_window set, every layer sees keys with key_pos > query_pos - sliding_window
  Qwen2 / Qwen3 with use_sliding_window: the layers from max_window_layers on (or layer_types) slide likewise
  Granite (GraniteForCausalLM): Llama's maths with embeddings * embedding_multiplier, scores * attention_multiplier
        (not head_dim ** -0.5), o-proj and down-proj outputs * residual_multiplier, logits / logits_scaling
  OLMo 2 / 3 (Olmo2ForCausalLM, Olmo3ForCausalLM): h = h + post_attention_layernorm(attn(h)); h = h +
        post_feedforward_layernorm(mlp(h)), no pre-norms; q_norm / k_norm over the whole q / k projection before
        the split into heads; OLMo 3's layer_types (default: all but every fourth) slide a window and rotate with
        the default (unscaled) RoPE, the full ones with rope_scaling
  gpt-oss (GptOssForCausalLM, modeling_gpt_oss.py): Llama's block with q/k/v/o biases; every head's softmax has
        one more logit, the head's sink (self_attn.sinks), whose probability is dropped (eager_attention_forward);
        a window on the layers layer_types marks (default: the even ones); YaRN (its class default when rope_scaling is
        absent); every MLP an MoE: router logits x @ router.weight^T + router.bias, softmax over the top
        num_experts_per_tok logits, and per chosen expert gate_up = x @ gate_up_proj[e] + gate_up_proj_bias[e]
        (gate = columns 0::2, up = 1::2), gate clamped to <= 7, up to [-7, 7], out = ((up + 1) * gate *
        sigmoid(1.702 gate)) @ down_proj[e] + down_proj_bias[e], summed with index_add in expert order
  SmolLM3 (SmolLM3ForCausalLM): Llama's maths; the layers marked 0 in no_rope_layers (by default every
        no_rope_layer_interval-th) skip the rotation of q and k
  Gemma 2 (Gemma2ForCausalLM, model_type gemma2): Gemma 3's maths below without q/k norms, every layer rotating with
        rope_theta, the even layers (0, 2, ...) sliding unless layer_types says otherwise, and the soft-capping of
        scores and logits on by default (attn_logit_softcapping 50, final_logit_softcapping 30; null: off)
  Gemma 3 (Gemma3ForCausalLM, model_type gemma3_text): embeddings * hidden**0.5; Gemma3RMSNorm x * rsqrt(...) *
        (1 + w) everywhere (input, post_attention, pre_feedforward, post_feedforward, q/k over head_dim, final);
        h = h + post_attention_layernorm(attn(input_layernorm(h))); h = h + post_feedforward_layernorm(
        down(gelu_tanh(gate(x)) * up(x))), x = pre_feedforward_layernorm(h); scores * query_pre_attn_scalar**-0.5,
        soft-capped (tanh(s / cap) * cap) when attn_logit_softcapping is set; layers in layer_types (or every
        sliding_window_pattern-th layer global) "sliding_attention" see keys with key_pos > query_pos - sliding_window
        and rotate with rope_local_base_freq (default RoPE), the global ones with rope_theta and rope_scaling
        (default or linear); logits soft-capped by final_logit_softcapping when set

Qwen3.5 / Qwen3.6, dense and MoE (model_type qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text), and Qwen3-Next
(qwen3_next): Reference.from_dir and the CLI hand them to hybrid_reference.HybridReference (hybrid_reference.py beside
this file), which has this interface. LFM2 and LFM2-MoE (model_type lfm2, lfm2_moe) likewise go to
lfm2_reference.Lfm2Reference (lfm2_reference.py), and the Mamba-2
hybrids Granite 4.0-H (granitemoehybrid) and Nemotron-H (nemotron_h) to mamba2_reference.py's GraniteHybridReference
and NemotronHReference.

CLI (run it with Debian's /usr/bin/python3, which has torch):
  hf_reference.py --model DIR --ids "1 2 3" [--greedy N] [--logits-out FILE]
writes the prompt's logits as raw little-endian f32 [num_ids, vocab] to FILE and prints the greedy continuation
(argmax each step, ties to the lowest id; KV cache) as a JSON list of ids.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import struct
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets}}, then data.

_ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2)}


def _to_f32(raw: np.ndarray, dtype: str, shape: List[int]) -> np.ndarray:
    arr = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else raw.astype(np.float32)
    return arr.reshape(shape)


def read_safetensors(path: str, lazy: bool = False) -> Dict[str, np.ndarray]:
    """All tensors of one .safetensors file as float32 numpy arrays (F32, F16, BF16); with lazy, as functions that
    convert one tensor from the memory map when called (a model larger than the memory, one tensor at a time)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > size - 8:
            raise ValueError(f"{path}: header length {header_len} exceeds the file size {size}")
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    out: Dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        np_dtype, itemsize = _ST_DTYPES[dtype]
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * itemsize or end > data.size:
            raise ValueError(f"{path}: tensor {name} has data_offsets {begin}..{end} not matching shape {shape} {dtype}")
        raw = np.frombuffer(data[begin:end], dtype=np_dtype)
        out[name] = (lambda r=raw, d=dtype, s=shape: _to_f32(r, d, s)) if lazy else _to_f32(raw, dtype, shape)
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray]) -> None:
    """Writes float32 tensors (used to build HF-layout test directories)."""
    header = {}
    offset = 0
    blobs = []
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load_hf_tensors(model_dir: str, lazy: bool = False) -> Dict[str, np.ndarray]:
    """model.safetensors, or the shards named by model.safetensors.index.json (or model-*.safetensors); lazy as
    read_safetensors."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    elif os.path.exists(single):
        files = ["model.safetensors"]
        weight_map = None
    else:
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir, "model-*.safetensors")))
        weight_map = None
        if not files:
            raise FileNotFoundError(f"{model_dir}: no model.safetensors, index or model-*.safetensors shards")
    tensors: Dict[str, np.ndarray] = {}
    for fname in files:
        part = read_safetensors(os.path.join(model_dir, fname), lazy)
        for name, arr in part.items():
            if name in tensors:
                raise ValueError(f"{model_dir}: tensor {name} appears in more than one shard")
            if weight_map is not None and weight_map.get(name) != fname:
                raise ValueError(f"{model_dir}: tensor {name} found in {fname}, index says {weight_map.get(name)}")
            tensors[name] = arr
    if weight_map is not None:
        missing = set(weight_map) - set(tensors)
        if missing:
            raise ValueError(f"{model_dir}: tensors listed in the index but absent: {sorted(missing)[:5]}")
    return tensors


# ---------------------------------------------------------------------------------------------------------------
# RoPE


def yarn_inv_freq(dim: int, base: float, rs: dict, max_position_embeddings: int):
    """YaRN as _compute_yarn_parameters: inverse frequencies blended between the original (extrapolation) and the
    factor-divided (interpolation) ones over a linear ramp between the dimensions that turn beta_fast and beta_slow
    times over the original context; and the cos/sin scale (attention_factor, else 0.1 ln(factor) + 1, or the
    mscale / mscale_all_dim ratio)."""
    factor = rs["factor"]
    original = rs.get("original_max_position_embeddings") or max_position_embeddings

    def get_mscale(scale, mscale=1.0):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention = rs.get("attention_factor")
    if attention is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        attention = get_mscale(factor, m) / get_mscale(factor, m_all) if m and m_all else get_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    return interpolation * ramp + extrapolation * (1 - ramp), float(attention)


def default_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    # As _compute_default_rope_parameters: int64 arange, .float(), then theta ** (. / dim) in f32.
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def llama3_inv_freq(inv_freq: torch.Tensor, rope_scaling: dict) -> torch.Tensor:
    # As _compute_llama3_parameters.
    factor = rope_scaling["factor"]
    low_freq_factor = rope_scaling["low_freq_factor"]
    high_freq_factor = rope_scaling["high_freq_factor"]
    old_context_len = rope_scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


# ---------------------------------------------------------------------------------------------------------------
# The model

# Qwen3.5 / Qwen3.6 and Qwen3-Next (Gated DeltaNet + gated attention hybrids): hybrid_reference.py, which
# Reference.from_dir returns.
HYBRID_MODEL_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next")
# LFM2 and LFM2-MoE (gated short convolutions + GQA attention): lfm2_reference.py, which Reference.from_dir returns.
LFM2_MODEL_TYPES = ("lfm2", "lfm2_moe")
# The Mamba-2 hybrids, Granite 4.0-H and Nemotron-H: mamba2_reference.py, which Reference.from_dir returns.
MAMBA2_MODEL_TYPES = ("granitemoehybrid", "nemotron_h")


class Config:
    def __init__(self, cfg: dict):
        self.raw = cfg
        self.model_type = cfg.get("model_type", "llama")
        if self.model_type not in ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "qwen3_moe",
                                   "mixtral", "smollm3", "olmo2", "olmo3", "granite", "gpt_oss"):
            raise ValueError(f"model_type {self.model_type!r} is not supported (llama, mistral, qwen2, qwen3, gemma2, "
                             "gemma3_text, phi3, qwen3_moe, mixtral, smollm3, olmo2, olmo3, granite, gpt_oss)")
        self.gpt_oss = self.model_type == "gpt_oss"
        self.gemma = self.model_type in ("gemma2", "gemma3_text")
        # OLMo 2 / 3: no pre-norms, post_attention_layernorm / post_feedforward_layernorm on each sub-block's output,
        # q_norm / k_norm over the whole projection.
        self.olmo = self.model_type in ("olmo2", "olmo3")
        act = cfg.get("hidden_activation", "gelu_pytorch_tanh") if self.gemma else cfg.get("hidden_act", "silu")
        if act not in ("silu", "gelu_pytorch_tanh"):
            raise ValueError(f"activation {act!r} is not supported (silu, gelu_pytorch_tanh)")
        self.act = act
        self.hidden = int(cfg["hidden_size"])
        self.intermediate = int(cfg["intermediate_size"])
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.kv_heads = int(cfg.get("num_key_value_heads") or self.heads)
        self.head_dim = int(cfg.get("head_dim") or self.hidden // self.heads)
        self.vocab = int(cfg["vocab_size"])
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.theta = float(cfg.get("rope_theta", 10000.0))
        self.rot_dim = int(self.head_dim * float(cfg.get("partial_rotary_factor", 1.0)))
        # Mixture of experts: Qwen3-MoE (num_experts, moe_intermediate_size, norm_topk_prob, mlp_only_layers,
        # decoder_sparse_step) and Mixtral (num_local_experts of intermediate_size, always renormalised).
        self.experts, self.top_k, self.norm_topk = 0, 0, True
        self.moe_layers = [False] * self.layers
        if self.model_type == "qwen3_moe":
            self.experts, self.top_k = int(cfg["num_experts"]), int(cfg["num_experts_per_tok"])
            self.norm_topk = bool(cfg.get("norm_topk_prob", False))
            only, step = set(cfg.get("mlp_only_layers") or []), int(cfg.get("decoder_sparse_step", 1))
            self.moe_layers = [i not in only and (i + 1) % step == 0 for i in range(self.layers)]
        elif self.model_type == "mixtral":
            self.experts, self.top_k = int(cfg["num_local_experts"]), int(cfg.get("num_experts_per_tok", 2))
            self.moe_layers = [True] * self.layers
        elif self.gpt_oss:
            self.experts, self.top_k = int(cfg["num_local_experts"]), int(cfg.get("num_experts_per_tok", 4))
            self.moe_layers = [True] * self.layers
            self.eps = float(cfg.get("rms_norm_eps", 1e-5))
        self.rope_scaling = cfg.get("rope_scaling")
        if self.gpt_oss and self.rope_scaling is None:  # GptOssConfig's default
            self.rope_scaling = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "truncate": False, "original_max_position_embeddings": 4096}
        # LlamaConfig and Qwen2Config both default tie_word_embeddings to False; Gemma2Config, Gemma3TextConfig to True.
        self.tied = bool(cfg.get("tie_word_embeddings", self.gemma))
        self.sliding: List[bool] = [False] * self.layers
        self.window = 0
        self.attn_softcap = self.final_softcap = None
        self.query_scale = self.head_dim ** -0.5
        if self.gemma:
            self.window = int(cfg.get("sliding_window") or 0)
            gemma2 = self.model_type == "gemma2"
            if cfg.get("layer_types") is not None:
                self.sliding = [t == "sliding_attention" for t in cfg["layer_types"]]
            elif gemma2:  # Gemma2Attention: sliding_window if not bool(layer_idx % 2)
                self.sliding = [i % 2 == 0 for i in range(self.layers)]
            else:
                pattern = int(cfg.get("sliding_window_pattern", 6))
                self.sliding = [(i + 1) % pattern != 0 for i in range(self.layers)]
            # Gemma 2 rotates every layer with rope_theta; Gemma 3's local layers with rope_local_base_freq.
            self.local_theta = self.theta if gemma2 else float(cfg.get("rope_local_base_freq", 10000.0))
            # Gemma2Config's defaults (50, 30) apply when a key is absent; null switches the capping off.
            self.attn_softcap = cfg.get("attn_logit_softcapping", 50.0 if gemma2 else None)
            self.final_softcap = cfg.get("final_logit_softcapping", 30.0 if gemma2 else None)
            self.query_scale = float(cfg.get("query_pre_attn_scalar", self.head_dim)) ** -0.5
        elif self.model_type == "olmo3":
            # Olmo3Config: a window of 4096 on all but every fourth layer by default; Olmo3Model gives the sliding
            # layers a rotary embedding of rope_type "default" (no scaling), the full ones the configured one.
            self.window = int(cfg.get("sliding_window") or 4096)
            self.sliding = [t == "sliding_attention" for t in cfg["layer_types"]] if cfg.get("layer_types") else \
                [(i + 1) % 4 != 0 for i in range(self.layers)]
            self.local_theta = self.theta
        elif self.gpt_oss:
            self.window = int(cfg.get("sliding_window") or 128)
            self.sliding = [t == "sliding_attention" for t in cfg["layer_types"]] if cfg.get("layer_types") else \
                [i % 2 == 0 for i in range(self.layers)]
        elif self.model_type in ("mistral", "phi3", "mixtral") and cfg.get("sliding_window"):
            self.window = int(cfg["sliding_window"])
            self.sliding = [True] * self.layers
        elif self.model_type in ("qwen2", "qwen3", "smollm3") and cfg.get("use_sliding_window"):
            self.window = int(cfg["sliding_window"])
            first = int(cfg.get("max_window_layers", self.layers))
            self.sliding = [t == "sliding_attention" for t in cfg["layer_types"]] if cfg.get("layer_types") else \
                [i >= first for i in range(self.layers)]
        # SmolLM3Attention: use_rope = no_rope_layers[layer_idx] (default: every no_rope_layer_interval-th layer 0).
        self.rotates = [True] * self.layers
        if self.model_type == "smollm3":
            interval = int(cfg.get("no_rope_layer_interval", 4))
            self.rotates = [bool(r) for r in cfg.get("no_rope_layers") or
                            [int((i + 1) % interval != 0) for i in range(self.layers)]]
        # GraniteConfig's multipliers (default 1): embeddings, attention scores (in place of head_dim ** -0.5), each
        # block output before its residual add, and the logits' divisor.
        self.embedding_multiplier = self.residual_multiplier = self.logits_scaling = 1.0
        if self.model_type == "granite":
            self.embedding_multiplier = float(cfg.get("embedding_multiplier", 1.0))
            self.query_scale = float(cfg.get("attention_multiplier", 1.0))
            self.residual_multiplier = float(cfg.get("residual_multiplier", 1.0))
            self.logits_scaling = float(cfg.get("logits_scaling", 1.0))
        if self.heads % self.kv_heads != 0:
            raise ValueError(f"num_attention_heads {self.heads} is not a multiple of num_key_value_heads {self.kv_heads}")


class Reference:
    """The model in float32, with a simple KV cache. Construct with from_dir()."""

    def __init__(self, config: Config, tensors: Dict[str, np.ndarray]):
        self.cfg = c = config
        t = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in tensors.items()}

        def get(name: str, shape: Optional[Sequence[int]] = None, required: bool = True) -> Optional[torch.Tensor]:
            if name not in t:
                if required:
                    raise KeyError(f"missing tensor {name}")
                return None
            if shape is not None and tuple(t[name].shape) != tuple(shape):
                raise ValueError(f"tensor {name} has shape {tuple(t[name].shape)}, expected {tuple(shape)}")
            return t[name]

        q_out, kv_out = c.heads * c.head_dim, c.kv_heads * c.head_dim
        qkv_bias = c.model_type == "qwen2" or c.gpt_oss
        # Qwen3Attention, Gemma3Attention: q_norm / k_norm, RMSNorm over head_dim, before RoPE (OLMo's over the whole
        # projection, before the split into heads)
        qk_norm = c.model_type in ("qwen3", "qwen3_moe", "gemma3_text") or c.olmo
        q_norm_width, k_norm_width = (q_out, kv_out) if c.olmo else (c.head_dim, c.head_dim)
        if c.model_type == "phi3":  # fused projections -> the separate ones the rest reads
            for i in range(c.layers):
                p = f"model.layers.{i}."
                qkv = t.pop(p + "self_attn.qkv_proj.weight")
                t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"], t[p + "self_attn.v_proj.weight"] = \
                    torch.split(qkv, [q_out, kv_out, kv_out], dim=0)
                gate_up = t.pop(p + "mlp.gate_up_proj.weight")
                t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = torch.split(gate_up, c.intermediate, dim=0)
        self.embed = get("model.embed_tokens.weight", (c.vocab, c.hidden))
        self.layers = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            layer = {
                "ln1": None if c.olmo else get(p + "input_layernorm.weight", (c.hidden,)),
                # Gemma: post_attention_layernorm is the attention block's output norm, pre_feedforward the MLP's input
                "ln2": None if c.olmo else get(
                    p + ("pre_feedforward_layernorm.weight" if c.gemma else "post_attention_layernorm.weight"),
                    (c.hidden,)),
                "post_attn": get(p + "post_attention_layernorm.weight", (c.hidden,)) if c.gemma or c.olmo else None,
                "post_ffn": get(p + "post_feedforward_layernorm.weight", (c.hidden,)) if c.gemma or c.olmo else None,
                "wq": get(p + "self_attn.q_proj.weight", (q_out, c.hidden)),
                "wk": get(p + "self_attn.k_proj.weight", (kv_out, c.hidden)),
                "wv": get(p + "self_attn.v_proj.weight", (kv_out, c.hidden)),
                "wo": get(p + "self_attn.o_proj.weight", (c.hidden, q_out)),
                "bq": get(p + "self_attn.q_proj.bias", (q_out,), required=qkv_bias),
                "bk": get(p + "self_attn.k_proj.bias", (kv_out,), required=qkv_bias),
                "bv": get(p + "self_attn.v_proj.bias", (kv_out,), required=qkv_bias),
                "bo": get(p + "self_attn.o_proj.bias", (c.hidden,), required=c.gpt_oss),
                "sinks": get(p + "self_attn.sinks", (c.heads,)) if c.gpt_oss else None,
                "q_norm": get(p + "self_attn.q_norm.weight", (q_norm_width,), required=qk_norm),
                "k_norm": get(p + "self_attn.k_norm.weight", (k_norm_width,), required=qk_norm),
                "gate": get(p + "mlp.gate_proj.weight", (c.intermediate, c.hidden), required=not c.moe_layers[i]),
                "up": get(p + "mlp.up_proj.weight", (c.intermediate, c.hidden), required=not c.moe_layers[i]),
                "down": get(p + "mlp.down_proj.weight", (c.hidden, c.intermediate), required=not c.moe_layers[i]),
                "moe": self._experts(get, p) if c.moe_layers[i] else None,
                "bgate": get(p + "mlp.gate_proj.bias", (c.intermediate,), required=False),
                "bup": get(p + "mlp.up_proj.bias", (c.intermediate,), required=False),
                "bdown": get(p + "mlp.down_proj.bias", (c.hidden,), required=False),
            }
            self.layers.append(layer)
        self.norm = get("model.norm.weight", (c.hidden,))
        lm_head = get("lm_head.weight", (c.vocab, c.hidden), required=False)
        if lm_head is None:
            if not c.tied:
                raise KeyError("missing tensor lm_head.weight (and tie_word_embeddings is false)")
            lm_head = self.embed
        self.lm_head = lm_head

        inv_freq = default_inv_freq(c.rot_dim, c.theta)
        self.attention_scaling = 1.0
        self.long_context = False
        if c.rope_scaling:
            rope_type = c.rope_scaling.get("rope_type", c.rope_scaling.get("type", "default"))
            if rope_type == "llama3":
                inv_freq = llama3_inv_freq(inv_freq, c.rope_scaling)
            elif rope_type in ("longrope", "su"):
                self.longrope = c.rope_scaling
                original = int(c.raw.get("original_max_position_embeddings", c.raw["max_position_embeddings"]))
                ratio = c.raw["max_position_embeddings"] / original
                factor = c.rope_scaling.get("attention_factor")
                self.attention_scaling = factor if factor is not None else \
                    (1.0 if ratio <= 1.0 else math.sqrt(1 + math.log(ratio) / math.log(original)))
            elif rope_type == "linear":
                inv_freq = inv_freq / c.rope_scaling["factor"]
            elif rope_type == "yarn":
                inv_freq, self.attention_scaling = yarn_inv_freq(c.rot_dim, c.theta, c.rope_scaling,
                                                                 int(c.raw["max_position_embeddings"]))
            elif rope_type != "default":
                raise ValueError(f"rope_scaling type {rope_type!r} is not supported (default, linear, llama3)")
        self.inv_freq = inv_freq
        # Gemma 3's sliding layers rotate with their own base; every other family's with the one table.
        self.local_inv_freq = default_inv_freq(c.head_dim, c.local_theta) if c.gemma or c.window and c.olmo else None
        self.reset()

    def _experts(self, get, p: str):
        """The router and each expert's (gate, up, down) in the family's names."""
        c = self.cfg
        if c.gpt_oss:  # stacked: [experts, in, out], gate and up interleaved by column
            e, ff, m = c.experts, c.intermediate, p + "mlp."
            return (get(m + "router.weight", (e, c.hidden)), get(m + "router.bias", (e,)),
                    get(m + "experts.gate_up_proj", (e, c.hidden, 2 * ff)), get(m + "experts.gate_up_proj_bias", (e, 2 * ff)),
                    get(m + "experts.down_proj", (e, ff, c.hidden)), get(m + "experts.down_proj_bias", (e, c.hidden)))
        if c.model_type == "mixtral":
            moe, names, ff = p + "block_sparse_moe.", ("w1", "w3", "w2"), c.intermediate
        else:
            moe, names, ff = p + "mlp.", ("gate_proj", "up_proj", "down_proj"), int(c.raw["moe_intermediate_size"])
        experts = []
        for j in range(c.experts):
            x = f"{moe}experts.{j}."
            experts.append((get(x + names[0] + ".weight", (ff, c.hidden)), get(x + names[1] + ".weight", (ff, c.hidden)),
                            get(x + names[2] + ".weight", (c.hidden, ff))))
        return get(moe + "gate.weight", (c.experts, c.hidden)), experts

    def _gpt_oss_moe(self, x, router, router_bias, gate_up, gate_up_bias, down, down_bias) -> torch.Tensor:
        """GptOssMLP.forward: GptOssTopKRouter, then GptOssExperts' loop over the experts hit (its CPU path)."""
        top, chosen = torch.topk(x @ router.t() + router_bias, self.cfg.top_k, dim=-1)
        weights = torch.softmax(top, dim=1, dtype=top.dtype)
        out = torch.zeros_like(x)
        for e in range(self.cfg.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            gu = x[rows] @ gate_up[e] + gate_up_bias[e]
            gate, up = gu[..., ::2].clamp(min=None, max=7.0), gu[..., 1::2].clamp(min=-7.0, max=7.0)
            y = ((up + 1) * (gate * torch.sigmoid(gate * 1.702))) @ down[e] + down_bias[e]
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    def _moe(self, x: torch.Tensor, router: torch.Tensor, experts) -> torch.Tensor:
        """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock.forward."""
        c = self.cfg
        probs = torch.softmax(x @ router.t(), dim=1, dtype=torch.float)
        weights, chosen = torch.topk(probs, c.top_k, dim=-1)
        if c.norm_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, (gate, up, down) in enumerate(experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            h = x[rows]
            y = (torch.nn.functional.silu(h @ gate.t()) * (h @ up.t())) @ down.t()
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    @classmethod
    def from_dir(cls, model_dir: str) -> "Reference":
        with open(os.path.join(model_dir, "config.json")) as f:
            raw = json.load(f)
        if raw.get("model_type") in HYBRID_MODEL_TYPES:  # Qwen3.5 / 3.6 / Qwen3-Next: their own file, same interface
            import hybrid_reference
            return hybrid_reference.HybridReference.from_dir(model_dir)
        if raw.get("model_type") in LFM2_MODEL_TYPES:  # LFM2 / LFM2-MoE: their own file, same interface
            import lfm2_reference
            return lfm2_reference.Lfm2Reference.from_dir(model_dir)
        if raw.get("model_type") in MAMBA2_MODEL_TYPES:  # Granite 4.0-H / Nemotron-H: their own file, same interface
            import mamba2_reference
            cls_ = mamba2_reference.GraniteHybridReference if raw["model_type"] == "granitemoehybrid" else \
                mamba2_reference.NemotronHReference
            return cls_.from_dir(model_dir)
        return cls(Config(raw), load_hf_tensors(model_dir))

    def reset(self) -> None:
        self.cache_k: List[Optional[torch.Tensor]] = [None] * self.cfg.layers
        self.cache_v: List[Optional[torch.Tensor]] = [None] * self.cfg.layers
        self.pos = 0

    @staticmethod
    def _linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor]) -> torch.Tensor:
        y = x @ w.t()
        return y + b if b is not None else y

    def _rms_norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        normed = x * torch.rsqrt(variance + self.cfg.eps)
        return normed * (1.0 + w) if self.cfg.gemma else w * normed

    def _inv_freq(self) -> torch.Tensor:
        scaling = self.cfg.rope_scaling
        if scaling and scaling.get("rope_type", scaling.get("type")) in ("longrope", "su"):
            ext = torch.tensor(scaling["long_factor" if self.long_context else "short_factor"], dtype=torch.float32)
            return 1.0 / (ext * self.cfg.theta ** (torch.arange(0, self.cfg.rot_dim, 2).float() / self.cfg.rot_dim))
        return self.inv_freq

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rot = self.cfg.rot_dim  # partial rotary: the rest of the head passes through
        x_rot, x_pass = x[..., :rot], x[..., rot:]
        return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)

    def _rope(self, positions: torch.Tensor, inv_freq: torch.Tensor, scaling: float):
        freqs = positions[:, None] * inv_freq[None, :]  # [n, d/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * scaling)[:, None, :], (emb.sin() * scaling)[:, None, :]

    @torch.no_grad()
    def forward(self, ids: Sequence[int], embeds: Optional[Dict[int, np.ndarray]] = None,
                bidirectional: Sequence[Tuple[int, int]] = ()) -> torch.Tensor:
        """Appends ids at the current position; returns their logits [len(ids), vocab] (float32).

        Multimodal prompts (Gemma3ForConditionalGeneration): embeds maps an index of ids to the embedding that
        replaces its row (after the Gemma scale, as masked_scatter replaces inputs_embeds); each (start, end) span of
        bidirectional (absolute positions) is an image whose tokens see each other (the token_type_ids mask OR-ed
        onto the causal and sliding masks)."""
        c = self.cfg
        n = len(ids)
        ids_t = torch.tensor(list(ids), dtype=torch.long)
        if int(ids_t.min()) < 0 or int(ids_t.max()) >= c.vocab:
            raise ValueError(f"token id out of range [0, {c.vocab})")
        positions = torch.arange(self.pos, self.pos + n, dtype=torch.float32)
        rope_global = self._rope(positions, self._inv_freq(), self.attention_scaling)  # cos, sin [n, 1, rot]
        # The local layers' default rope: no scaling, cos / sin unscaled.
        rope_local = self._rope(positions, self.local_inv_freq, 1.0) if self.local_inv_freq is not None else rope_global
        total = self.pos + n
        # Causal mask: query i (position pos + i) sees keys 0 .. pos + i; sliding layers only the last `window`.
        key_pos = torch.arange(total)[None, :]
        query_pos = torch.arange(self.pos, total)[:, None]
        mask = torch.where(key_pos <= query_pos, 0.0, float("-inf")).to(torch.float32)  # [n, total]
        window_mask = torch.where((key_pos <= query_pos) & (key_pos > query_pos - c.window), 0.0,
                                  float("-inf")).to(torch.float32)
        for start, end in bidirectional:
            both = (key_pos >= start) & (key_pos < end) & (query_pos >= start) & (query_pos < end)
            mask = mask.masked_fill(both, 0.0)
            window_mask = window_mask.masked_fill(both, 0.0)
        rep = c.heads // c.kv_heads
        scale = c.query_scale

        h = self.embed[ids_t]  # [n, hidden]
        if c.gemma:
            h = h * torch.tensor(c.hidden ** 0.5, dtype=torch.float32)
        h = h * c.embedding_multiplier
        for row, e in (embeds or {}).items():
            h[row] = torch.from_numpy(np.asarray(e, dtype=np.float32))
        for i, L in enumerate(self.layers):
            cos, sin = rope_local if c.sliding[i] else rope_global
            layer_mask = window_mask if c.sliding[i] else mask
            x = h if L["ln1"] is None else self._rms_norm(h, L["ln1"])
            q, k = self._linear(x, L["wq"], L["bq"]), self._linear(x, L["wk"], L["bk"])
            if c.olmo:
                q, k = self._rms_norm(q, L["q_norm"]), self._rms_norm(k, L["k_norm"])
            q, k = q.view(n, c.heads, c.head_dim), k.view(n, c.kv_heads, c.head_dim)
            v = self._linear(x, L["wv"], L["bv"]).view(n, c.kv_heads, c.head_dim)
            if L["q_norm"] is not None and not c.olmo:
                q = self._rms_norm(q, L["q_norm"])
                k = self._rms_norm(k, L["k_norm"])
            if c.rotates[i]:
                q = self._rotate(q, cos, sin)
                k = self._rotate(k, cos, sin)
            self.cache_k[i] = k if self.cache_k[i] is None else torch.cat((self.cache_k[i], k), dim=0)
            self.cache_v[i] = v if self.cache_v[i] is None else torch.cat((self.cache_v[i], v), dim=0)
            keys = self.cache_k[i].repeat_interleave(rep, dim=1)  # repeat_kv: [total, heads, d]
            values = self.cache_v[i].repeat_interleave(rep, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, keys) * scale
            if c.attn_softcap:
                scores = torch.tanh(scores / c.attn_softcap) * c.attn_softcap
            scores = scores + layer_mask[None]
            if L["sinks"] is not None:  # one more logit per head, its probability dropped
                sinks = L["sinks"].reshape(-1, 1, 1).expand(-1, n, 1)
                probs = torch.softmax(torch.cat([scores, sinks], dim=-1), dim=-1, dtype=torch.float32)[..., :-1]
            else:
                probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
            attn = torch.einsum("hqk,khd->qhd", probs, values).reshape(n, c.heads * c.head_dim)
            o = self._linear(attn, L["wo"], L["bo"]) * c.residual_multiplier
            h = h + (self._rms_norm(o, L["post_attn"]) if L["post_attn"] is not None else o)
            x = h if L["ln2"] is None else self._rms_norm(h, L["ln2"])
            if L["moe"] is not None:
                h = h + (self._gpt_oss_moe(x, *L["moe"]) if c.gpt_oss else self._moe(x, *L["moe"]))
                continue
            gate = self._linear(x, L["gate"], L["bgate"])
            up = self._linear(x, L["up"], L["bup"])
            act = torch.nn.functional.gelu(gate, approximate="tanh") if c.act == "gelu_pytorch_tanh" else \
                torch.nn.functional.silu(gate)
            d = self._linear(act * up, L["down"], L["bdown"]) * c.residual_multiplier
            h = h + (self._rms_norm(d, L["post_ffn"]) if L["post_ffn"] is not None else d)
        self.pos = total
        logits = self._rms_norm(h, self.norm) @ self.lm_head.t() / c.logits_scaling
        if c.final_softcap:
            logits = torch.tanh(logits / c.final_softcap) * c.final_softcap
        return logits

    def prompt_logits(self, ids: Sequence[int]) -> np.ndarray:
        """Logits of every prompt position, [len(ids), vocab] float32 (resets the cache first)."""
        self.reset()
        return self.forward(ids).numpy()

    def greedy(self, ids: Sequence[int], steps: int) -> List[int]:
        """Greedy continuation of ids for `steps` tokens (no stop token; torch.argmax picks the lowest id on ties)."""
        self.reset()
        logits = self.forward(ids)
        out: List[int] = []
        for _ in range(steps):
            nxt = int(torch.argmax(logits[-1]))
            out.append(nxt)
            if len(out) == steps:
                break
            logits = self.forward([nxt])
        return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model directory (config.json + safetensors)")
    ap.add_argument("--ids", required=True, help='prompt token ids, space separated, e.g. "1 2 3"')
    ap.add_argument("--greedy", type=int, default=0, help="greedy continuation length (printed as JSON)")
    ap.add_argument("--logits-out", help="write the prompt's logits here: raw little-endian f32 [num_ids, vocab]")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = all cores)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    ids = [int(x) for x in args.ids.split()]
    if not ids:
        ap.error("--ids is empty")
    model = Reference.from_dir(args.model)
    if args.logits_out:
        model.prompt_logits(ids).astype("<f4").tofile(args.logits_out)
    print(json.dumps(model.greedy(ids, args.greedy) if args.greedy > 0 else []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
