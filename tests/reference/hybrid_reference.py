#!/usr/bin/python3
"""An independent PyTorch oracle for Hugging Face Qwen3.5 / Qwen3.6 text models, dense and MoE (model_type qwen3_5,
qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text), and Qwen3-Next (qwen3_next): a hybrid of Gated DeltaNet
("linear_attention") layers and gated full attention layers. Written from the equations of transformers 5.25's
modeling_qwen3_5.py / modeling_qwen3_5_moe.py / modeling_qwen3_next.py (not their code); hf_reference.Reference.from_dir
(and its CLI) hands these model types to HybridReference here, which has the same interface: forward(ids) appends at
the current position (attention KV cache, convolution and recurrent states carried between calls), reset(),
prompt_logits(), greedy(), a long_context attribute (unused).

Config: for qwen3_5 / qwen3_5_moe (the ConditionalGeneration checkpoint) the text model's fields are under
"text_config" (tie_word_embeddings is read at the top level, as transformers does, else from text_config); for the
*_text types they are at the top. Fields read: hidden_size, num_hidden_layers, vocab_size, num_attention_heads,
num_key_value_heads, head_dim (256), rms_norm_eps (1e-6), hidden_act (silu only), attention_bias (false),
intermediate_size (dense), layer_types (default: every full_attention_interval-th (4) layer "full_attention", the
rest "linear_attention"), linear_num_key_heads (16), linear_num_value_heads (32), linear_key_head_dim (128),
linear_value_head_dim (128), linear_conv_kernel_dim (4), rope_parameters (or rope_scaling) {rope_type "default"
only, rope_theta, partial_rotary_factor}, with top-level rope_theta (10000) / partial_rotary_factor (0.25) as
fallbacks; MoE: num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size.

Weights (P = "model.language_model." when model.language_model.embed_tokens.weight exists, else "model."; the
tensors model.visual.* and mtp.* are ignored, any other tensor left unread is an error):
  P.embed_tokens.weight [V, H], P.norm.weight [H], lm_head.weight [V, H] (unless tied)
  per layer P.layers.i.: input_layernorm.weight, post_attention_layernorm.weight [H]
  full attention: self_attn.q_proj.weight [heads*2*hd, H] (per head: q rows then gate rows), k_proj / v_proj
      [kv*hd, H], o_proj [H, heads*hd], q_norm.weight / k_norm.weight [hd] (biases .bias if attention_bias)
  linear attention: linear_attn.in_proj_qkv.weight [2*Hk*dk + Hv*dv, H] (rows q | k | v), in_proj_z [Hv*dv, H],
      in_proj_b [Hv, H], in_proj_a [Hv, H], conv1d.weight [2*Hk*dk + Hv*dv, 1, K], A_log [Hv], dt_bias [Hv],
      norm.weight [dv], out_proj.weight [H, Hv*dv]
  dense MLP: mlp.gate_proj / up_proj [I, H], mlp.down_proj [H, I]
  MoE: mlp.gate.weight [E, H] (router); experts stacked mlp.experts.gate_up_proj [E, 2*Im, H] (rows gate | up) and
      mlp.experts.down_proj [E, H, Im], or per expert mlp.experts.j.{gate,up,down}_proj.weight (what transformers'
      qwen2_moe conversion merges into the stacked form); mlp.shared_expert.{gate,up,down}_proj.weight (Is),
      mlp.shared_expert_gate.weight [1, H]

Semantics:
  RMSNorm (all but the DeltaNet output norm) is zero-centred: x * rsqrt(mean(x^2) + eps) * (1 + w).
  Full attention: q_proj gives per head [q | gate]; q_norm / k_norm per head; RoPE (rotate_half) on the first
      rot = int(head_dim * partial_rotary_factor) dims (mRoPE with text positions, all three ids equal, is plain
      RoPE); causal softmax(q k^T * head_dim^-0.5) v with GQA; o_proj(attn * sigmoid(gate)).
  Gated DeltaNet: qkv = in_proj_qkv(x) -> causal depthwise conv (kernel K, no bias, state = the last K-1 inputs)
      -> SiLU -> q, k, v heads; q, k L2-normalised per head (x * rsqrt(sum x^2 + 1e-6)), q * dk^-0.5; value head
      h reads key head h // (Hv / Hk); beta = sigmoid(in_proj_b(x)); g = -exp(A_log) * softplus(in_proj_a(x) +
      dt_bias); per token: S = S * exp(g); delta = beta * (v - S^T k); S = S + k delta^T; o = S^T q (S [dk, dv] per
      value head, float64); out = out_proj(norm.weight * rmsnorm(o) * silu(in_proj_z(x))) per value head.
  MoE: softmax(router(x)) in f32, top num_experts_per_tok, always renormalised (Qwen3_5MoeTopKRouter has no
      norm_topk_prob switch), sum of weight_e * down_e(silu(gate_e x) * up_e x) in expert order, plus
      sigmoid(shared_expert_gate(x)) * shared_expert(x).
  Numerics: weights upcast to f32, everything f32 except the delta-rule recurrence (float64 state and products).

Qwen3-Next (Qwen3NextConfig, flat config.json) is the same model with these differences:
  * fused projections: linear_attn.in_proj_qkvz.weight [2*Hk*dk + 2*Hv*dv, H], its rows grouped per key head g as
    [q_g (dk) | k_g (dk) | v of value heads g*r .. g*r+r-1 (r*dv) | z of those heads (r*dv)], r = Hv / Hk, and
    linear_attn.in_proj_ba.weight [2*Hv, H] grouped per key head as [b of its r value heads | a of them]; split at
    load time (split_qkvz_ba) into Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, after which the maths is
    the above (its conv1d, A_log, dt_bias, norm and out_proj are laid out as Qwen3.5's);
  * MoE per layer: layer i is MoE when num_experts > 0, i not in mlp_only_layers and (i + 1) % decoder_sparse_step
    == 0, else a dense MLP of intermediate_size (P.layers.i.mlp.{gate,up,down}_proj); norm_topk_prob (default true)
    switches the renormalisation of the top-k softmax weights;
  * defaults as Qwen3NextConfig's (which are Qwen3.5's for every field read here); mtp.* tensors ignored.

Checked (in a scratch folder, not in the repository) on random tiny checkpoints: hidden 64, 4 layers (3 linear + 1
full), heads 4 / kv 2 / head_dim 32 (8 rotary dims), Hk 2 / Hv 4 / dk = dv = 16, conv kernel 4, vocab 256; dense
(intermediate 128, untied and tied) and MoE (8 experts, top 2, moe_intermediate 32, shared 48; stacked and per
expert), each also in the nested qwen3_5 / qwen3_5_moe layout under model.language_model.; a 150-token prompt:
  * one forward call vs token by token vs uneven chunks: within 5e-5 (f32 rounding); per-expert == stacked,
    nested == flat and the CLI == in-process, exactly;
  * against transformers 5.25.0 itself (torch 2.15 CPU, eager attention; its torch chunked delta rule for a whole
    prompt, its recurrent one for single tokens after a 5-token prefill; Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM
    and both *ForConditionalGeneration): f32 logits within 2.7e-5 (max over positions of max |diff| / max |logit|;
    transformers' own two paths differ from each other by up to 4.4e-5), 16 greedy ids identical; with both sides
    in float64 (this file's float32 -> float64, transformers' internal float32 casts patched to float64, eager
    experts): within 3.5e-14 dense, 7.2e-14 MoE, so the semantics agree and the f32 gaps are rounding;
  * this f32 reference vs the same maths in float64: about 1e-6 at a typical position, 1.7e-5 to 3e-5 at the worst
    (random weights; the tied model's logits reach 35).
Qwen3-Next, checked the same way against transformers 5.25.0 (torch 2.15 CPU, eager; Qwen3NextForCausalLM saved by
save_pretrained, per-expert tensors): hidden 64, 4 layers linear, full, linear, full, heads 4 / kv 2 / head_dim 32,
Hk 2 / Hv 4 / dk = dv = 16, 8 experts top 2 (32 wide), shared 48, vocab 320, a 40-token prompt: within 4.4e-6 of its
whole-prompt logits and 9.4e-6 of its cached ones (its own two paths differ by 7.1e-6); with mlp_only_layers [1],
norm_topk_prob false, Hv = Hk and tied embeddings within 3.8e-6; one call vs token by token within 5.2e-6; llama.cpp's
qwen3next on gguf_py_hybrids.py's GGUF of the first: within 9.5e-6 (max |diff| 4.7e-5), argmax identical at every
position (the second is refused: llama.cpp's qwen3next has MoE in every layer and always renormalises).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

import hf_reference  # tests/reference is on sys.path (the CLI's own folder, or conftest)

MODEL_TYPES = hf_reference.HYBRID_MODEL_TYPES  # qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, qwen3_next



def ids_and_rope(ids: Sequence[int], vocab: int, pos: int, inv_freq: torch.Tensor):
    """The ids as a tensor (checked against the vocabulary) and the NeoX-form cos / sin [n, 1, rot] of positions
    pos .. pos + n - 1."""
    n = len(ids)
    ids_t = torch.tensor(list(ids), dtype=torch.long)
    if n == 0 or int(ids_t.min()) < 0 or int(ids_t.max()) >= vocab:
        raise ValueError(f"ids must be a non-empty list of token ids in [0, {vocab})")
    positions = torch.arange(pos, pos + n, dtype=torch.float32)
    freqs = positions[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return ids_t, emb.cos()[:, None, :], emb.sin()[:, None, :]


def split_qkvz_ba(w_qkvz: torch.Tensor, w_ba: torch.Tensor, c: "HybridConfig") -> tuple:
    """Qwen3-Next's fused projections into Qwen3.5's in_proj_qkv (rows q | k | v), in_proj_z, in_proj_b, in_proj_a.
    in_proj_qkvz's rows are grouped per key head g: [q_g (dk) | k_g (dk) | v of value heads g*r .. g*r+r-1 (r dv) |
    z of the same heads (r dv)], r = Hv / Hk; in_proj_ba's per key head [b of its r value heads | a of them]
    (Qwen3NextGatedDeltaNet.fix_query_key_value_ordering)."""
    r, h = c.hv // c.hk, w_qkvz.shape[1]
    q, k, v, z = w_qkvz.view(c.hk, 2 * c.dk + 2 * r * c.dv, h).split([c.dk, c.dk, r * c.dv, r * c.dv], dim=1)
    b, a = w_ba.view(c.hk, 2 * r, h).split([r, r], dim=1)
    w_qkv = torch.cat([q.reshape(-1, h), k.reshape(-1, h), v.reshape(-1, h)])
    return w_qkv, z.reshape(-1, h), b.reshape(-1, h), a.reshape(-1, h)


class HybridConfig:
    """The text model's hyper-parameters, with Qwen3_5TextConfig's / Qwen3_5MoeTextConfig's / Qwen3NextConfig's
    defaults."""

    def __init__(self, raw: dict):
        self.model_type = raw.get("model_type")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type {self.model_type!r} is not a Qwen3.5 / Qwen3-Next type "
                             f"({', '.join(MODEL_TYPES)})")
        nested = self.model_type in ("qwen3_5", "qwen3_5_moe")
        t = (raw.get("text_config") or {}) if nested else raw
        self.qwen3_next = self.model_type == "qwen3_next"
        self.moe = self.model_type.startswith("qwen3_5_moe") or (self.qwen3_next and int(t.get("num_experts", 512)) > 0)
        self.hidden, self.layers = int(t["hidden_size"]), int(t["num_hidden_layers"])
        self.vocab = int(t["vocab_size"])
        self.heads = int(t["num_attention_heads"])
        self.kv_heads = int(t.get("num_key_value_heads") or self.heads)
        self.head_dim = int(t.get("head_dim") or 256)
        self.eps = float(t.get("rms_norm_eps", 1e-6))
        self.bias = bool(t.get("attention_bias", False))
        if t.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {t.get('hidden_act')!r} is not supported (silu)")
        # Gated DeltaNet sizes.
        self.hk, self.hv = int(t.get("linear_num_key_heads", 16)), int(t.get("linear_num_value_heads", 32))
        self.dk, self.dv = int(t.get("linear_key_head_dim", 128)), int(t.get("linear_value_head_dim", 128))
        self.conv_k = int(t.get("linear_conv_kernel_dim", 4))
        if self.hv % self.hk or self.heads % self.kv_heads:
            raise ValueError("value heads must be a multiple of key heads, query heads of KV heads")
        interval = int(t.get("full_attention_interval", 4))
        self.layer_types: List[str] = list(t.get("layer_types") or [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(self.layers)])
        if len(self.layer_types) != self.layers or set(self.layer_types) - {"full_attention", "linear_attention"}:
            raise ValueError(f"layer_types {self.layer_types} do not describe {self.layers} layers")
        # RoPE: rope_parameters first, then the legacy top-level keys, then the class defaults.
        rp = t.get("rope_parameters") or t.get("rope_scaling") or {}
        rope_type = rp.get("rope_type", rp.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"rope_type {rope_type!r} is not supported (default)")
        self.theta = float(rp.get("rope_theta", t.get("rope_theta", 10000.0)))
        self.rot_dim = int(self.head_dim * float(rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))))
        # ConditionalGeneration ties per the top-level config (PreTrainedModel reads self.config there).
        self.tied = bool(raw.get("tie_word_embeddings", t.get("tie_word_embeddings", False)))
        # Which layers are MoE: all of Qwen3.5-MoE's, none of Qwen3.5's; Qwen3-Next's but those in mlp_only_layers
        # and off the decoder_sparse_step grid (Qwen3NextDecoderLayer), the others a dense MLP of intermediate_size.
        only, step = set(t.get("mlp_only_layers") or []), int(t.get("decoder_sparse_step", 1))
        self.moe_layers = [self.moe and not (self.qwen3_next and (i in only or (i + 1) % step))
                           for i in range(self.layers)]
        self.norm_topk = bool(t.get("norm_topk_prob", True)) if self.qwen3_next else True
        if self.moe:
            self.experts, self.top_k = int(t["num_experts"]), int(t["num_experts_per_tok"])
            self.moe_inter = int(t["moe_intermediate_size"])
            self.shared_inter = int(t["shared_expert_intermediate_size"])
        if not all(self.moe_layers):
            self.intermediate = int(t["intermediate_size"])


def zc_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3_5RMSNorm: zero-centred weight (stored w, applied as 1 + w)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    # As the FLA kernels: rsqrt(sum x^2 + 1e-6), not x / max(|x|, eps).
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def stacked_experts(get, m: str, e: int, im: int, h: int, load_mlp):
    """The experts of MoE block `m` as [E, 2 Im, H] gate|up and [E, H, Im] down: transformers 5's stacked tensors, or
    the checkpoint's per-expert ones (load_mlp(get, prefix, width) -> gate, up, down) stacked the way its conversion
    merges them."""
    if m + "experts.gate_up_proj" in get.t:
        return get(m + "experts.gate_up_proj", (e, 2 * im, h)), get(m + "experts.down_proj", (e, h, im))
    per = [load_mlp(get, f"{m}experts.{j}.", im) for j in range(e)]
    return torch.stack([torch.cat((g, u), dim=0) for g, u, _ in per]), torch.stack([d for _, _, d in per])


class _Weights:
    """Tensor lookup with shape checks that remembers what was read (so unread tensors can be reported)."""

    def __init__(self, tensors: Dict[str, np.ndarray]):
        self.t = tensors
        self.used = set()

    def __call__(self, name: str, shape: Sequence[int], required: bool = True) -> Optional[torch.Tensor]:
        if name not in self.t:
            if required:
                raise KeyError(f"missing tensor {name}")
            return None
        self.used.add(name)
        w = torch.from_numpy(np.ascontiguousarray(self.t[name], dtype=np.float32))
        if tuple(w.shape) != tuple(shape):
            raise ValueError(f"tensor {name} has shape {tuple(w.shape)}, expected {tuple(shape)}")
        return w

    def unread(self) -> List[str]:
        # The vision tower, the multi-token-prediction head and a tied checkpoint's redundant lm_head go unread.
        skip = ("model.visual.", "mtp.", "lm_head.weight")
        return sorted(n for n in self.t if n not in self.used and not n.startswith(skip))


class HybridReference:
    """The model in float32 (the delta rule in float64) with its caches. Construct with from_dir()."""

    def __init__(self, cfg: HybridConfig, tensors: Dict[str, np.ndarray]):
        self.cfg = c = cfg
        get = _Weights(tensors)
        p = "model.language_model." if "model.language_model.embed_tokens.weight" in tensors else "model."
        self.embed = get(p + "embed_tokens.weight", (c.vocab, c.hidden))
        self.layers = []
        for i, kind in enumerate(c.layer_types):
            lp = f"{p}layers.{i}."
            layer = {"kind": kind, "ln1": get(lp + "input_layernorm.weight", (c.hidden,)),
                     "ln2": get(lp + "post_attention_layernorm.weight", (c.hidden,))}
            layer.update(self._load_attention(get, lp + "self_attn.") if kind == "full_attention"
                         else self._load_linear(get, lp + "linear_attn."))
            layer["moe"] = c.moe_layers[i]
            layer["mlp"] = self._load_moe(get, lp + "mlp.") if c.moe_layers[i] else self._load_mlp(
                get, lp + "mlp.", c.intermediate)
            self.layers.append(layer)
        self.norm = get(p + "norm.weight", (c.hidden,))
        self.lm_head = self.embed if c.tied else get("lm_head.weight", (c.vocab, c.hidden))
        unread = get.unread()
        if unread:
            raise ValueError(f"tensors this reference does not read: {unread[:8]}{' ...' if len(unread) > 8 else ''}")
        self.inv_freq = 1.0 / (c.theta ** (torch.arange(0, c.rot_dim, 2, dtype=torch.float32) / c.rot_dim))
        self.long_context = False  # the interface of hf_reference.Reference; no long-context switch here
        self.reset()

    def _load_attention(self, get, a: str) -> dict:
        c = self.cfg
        q_out, kv_out = c.heads * c.head_dim, c.kv_heads * c.head_dim
        return {"wq": get(a + "q_proj.weight", (2 * q_out, c.hidden)),
                "wk": get(a + "k_proj.weight", (kv_out, c.hidden)),
                "wv": get(a + "v_proj.weight", (kv_out, c.hidden)),
                "wo": get(a + "o_proj.weight", (c.hidden, q_out)),
                "bq": get(a + "q_proj.bias", (2 * q_out,), c.bias), "bk": get(a + "k_proj.bias", (kv_out,), c.bias),
                "bv": get(a + "v_proj.bias", (kv_out,), c.bias), "bo": get(a + "o_proj.bias", (c.hidden,), c.bias),
                "q_norm": get(a + "q_norm.weight", (c.head_dim,)), "k_norm": get(a + "k_norm.weight", (c.head_dim,))}

    def _load_linear(self, get, a: str) -> dict:
        c = self.cfg
        conv_dim, v_dim = 2 * c.hk * c.dk + c.hv * c.dv, c.hv * c.dv
        if c.qwen3_next:  # fused projections, un-interleaved into Qwen3.5's four
            w_qkv, w_z, w_b, w_a = split_qkvz_ba(get(a + "in_proj_qkvz.weight", (conv_dim + v_dim, c.hidden)),
                                                 get(a + "in_proj_ba.weight", (2 * c.hv, c.hidden)), c)
        else:
            w_qkv, w_z = get(a + "in_proj_qkv.weight", (conv_dim, c.hidden)), get(a + "in_proj_z.weight",
                                                                                   (v_dim, c.hidden))
            w_b, w_a = get(a + "in_proj_b.weight", (c.hv, c.hidden)), get(a + "in_proj_a.weight", (c.hv, c.hidden))
        return {"w_qkv": w_qkv, "w_z": w_z, "w_b": w_b, "w_a": w_a,
                "conv": get(a + "conv1d.weight", (conv_dim, 1, c.conv_k))[:, 0, :],  # [channels, K]
                "A_log": get(a + "A_log", (c.hv,)), "dt_bias": get(a + "dt_bias", (c.hv,)),
                "norm": get(a + "norm.weight", (c.dv,)),
                "w_out": get(a + "out_proj.weight", (c.hidden, v_dim))}

    def _load_mlp(self, get, m: str, inter: int) -> tuple:
        h = self.cfg.hidden
        return (get(m + "gate_proj.weight", (inter, h)), get(m + "up_proj.weight", (inter, h)),
                get(m + "down_proj.weight", (h, inter)))

    def _load_moe(self, get, m: str) -> dict:
        """Router, experts as stacked [E, 2I, H] gate|up and [E, H, I] down (per-expert tensors stacked the way
        transformers' conversion merges them), shared expert and its gate."""
        c = self.cfg
        e, im, h = c.experts, c.moe_inter, c.hidden
        gate_up, down = stacked_experts(get, m, e, im, h, self._load_mlp)
        return {"router": get(m + "gate.weight", (e, h)), "gate_up": gate_up, "down": down,
                "shared": self._load_mlp(get, m + "shared_expert.", c.shared_inter),
                "shared_gate": get(m + "shared_expert_gate.weight", (1, h))}

    @classmethod
    def from_dir(cls, model_dir: str) -> "HybridReference":
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = HybridConfig(json.load(f))
        return cls(cfg, hf_reference.load_hf_tensors(model_dir))

    def reset(self) -> None:
        """Empty caches: K/V for attention layers; the conv window (K-1 zero inputs) and a zero delta-rule state
        for the linear ones."""
        c = self.cfg
        conv_dim = 2 * c.hk * c.dk + c.hv * c.dv
        self.cache_k: List[Optional[torch.Tensor]] = [None] * c.layers
        self.cache_v: List[Optional[torch.Tensor]] = [None] * c.layers
        self.conv_state = [torch.zeros(c.conv_k - 1, conv_dim) for _ in range(c.layers)]
        self.ssm_state = [torch.zeros(c.hv, c.dk, c.dv, dtype=torch.float64) for _ in range(c.layers)]
        self.pos = 0

    @staticmethod
    def _linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
        y = x @ w.t()
        return y if b is None else y + b

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rot = self.cfg.rot_dim  # partial rotary: dims past rot pass through
        x_rot, x_pass = x[..., :rot], x[..., rot:]
        return torch.cat((x_rot * cos + hf_reference.rotate_half(x_rot) * sin, x_pass), dim=-1)

    def _attention(self, i: int, L: dict, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Qwen3_5Attention: per-head q and output gate from one projection, q/k norms, partial RoPE, GQA."""
        c, n = self.cfg, x.shape[0]
        qg = self._linear(x, L["wq"], L["bq"]).view(n, c.heads, 2 * c.head_dim)
        q, gate = qg[..., :c.head_dim], qg[..., c.head_dim:].reshape(n, c.heads * c.head_dim)
        k = self._linear(x, L["wk"], L["bk"]).view(n, c.kv_heads, c.head_dim)
        v = self._linear(x, L["wv"], L["bv"]).view(n, c.kv_heads, c.head_dim)
        q = self._rotate(zc_rms_norm(q, L["q_norm"], c.eps), cos, sin)
        k = self._rotate(zc_rms_norm(k, L["k_norm"], c.eps), cos, sin)
        self.cache_k[i] = k if self.cache_k[i] is None else torch.cat((self.cache_k[i], k))
        self.cache_v[i] = v if self.cache_v[i] is None else torch.cat((self.cache_v[i], v))
        rep = c.heads // c.kv_heads  # query head h reads KV head h // rep (repeat_kv)
        keys, values = self.cache_k[i].repeat_interleave(rep, dim=1), self.cache_v[i].repeat_interleave(rep, dim=1)
        total = keys.shape[0]
        scores = torch.einsum("qhd,khd->hqk", q, keys) * c.head_dim ** -0.5
        causal = torch.arange(total)[None, :] <= torch.arange(total - n, total)[:, None]  # [n, total]
        scores = scores.masked_fill(~causal[None], float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
        attn = torch.einsum("hqk,khd->qhd", probs, values).reshape(n, c.heads * c.head_dim)
        return self._linear(attn * torch.sigmoid(gate), L["wo"], L["bo"])

    def _conv(self, i: int, L: dict, mixed: torch.Tensor) -> torch.Tensor:
        """Causal depthwise conv + SiLU: out[t, ch] = sum_j w[ch, j] * in[t - (K-1) + j], the inputs before this call
        coming from the carried state (zeros at the start)."""
        K, n = self.cfg.conv_k, mixed.shape[0]
        padded = torch.cat((self.conv_state[i], mixed))  # [K-1+n, ch]
        self.conv_state[i] = padded[padded.shape[0] - (K - 1):].clone()
        windows = padded.unfold(0, K, 1)  # [n, ch, K]: row t holds inputs t .. t+K-1 of padded
        assert windows.shape[0] == n
        return F.silu((windows * L["conv"]).sum(-1))

    def _delta_rule(self, i: int, q, k, v, g, beta) -> torch.Tensor:
        """The gated delta rule, one token at a time, in float64. q, k [n, Hv, dk] (already per value head),
        v [n, Hv, dv], g, beta [n, Hv]; returns o [n, Hv, dv] in float32 and carries S [Hv, dk, dv]."""
        S = self.ssm_state[i]
        q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
        out = torch.empty_like(v)
        for t in range(v.shape[0]):
            S = S * torch.exp(g[t])[:, None, None]                  # decay
            kv = torch.einsum("hkv,hk->hv", S, k[t])                # what the state predicts for k: S^T k
            delta = beta[t][:, None] * (v[t] - kv)                  # the correction, scaled by the write strength
            S = S + k[t][:, :, None] * delta[:, None, :]            # rank-1 write k delta^T
            out[t] = torch.einsum("hkv,hk->hv", S, q[t])            # read with the query: S^T q
        self.ssm_state[i] = S
        return out.float()

    def _gated_delta_net(self, i: int, L: dict, x: torch.Tensor) -> torch.Tensor:
        """Qwen3_5GatedDeltaNet: projections, conv, per-head L2 norms, the delta rule, gated RMSNorm, out_proj."""
        c, n = self.cfg, x.shape[0]
        mixed = self._conv(i, L, self._linear(x, L["w_qkv"]))
        q, k, v = torch.split(mixed, [c.hk * c.dk, c.hk * c.dk, c.hv * c.dv], dim=-1)
        rep = c.hv // c.hk  # value head h reads key head h // rep (repeat_interleave)
        q = l2_normalize(q.reshape(n, c.hk, c.dk)).repeat_interleave(rep, dim=1) * c.dk ** -0.5
        k = l2_normalize(k.reshape(n, c.hk, c.dk)).repeat_interleave(rep, dim=1)
        v = v.reshape(n, c.hv, c.dv)
        beta = torch.sigmoid(self._linear(x, L["w_b"]))
        g = -torch.exp(L["A_log"]) * F.softplus(self._linear(x, L["w_a"]) + L["dt_bias"])
        o = self._delta_rule(i, q, k, v, g, beta)  # [n, Hv, dv]
        # Qwen3_5RMSNormGated: plain weight (not zero-centred), then the SiLU gate from in_proj_z, per value head.
        z = self._linear(x, L["w_z"]).reshape(n, c.hv, c.dv)
        normed = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + c.eps)
        return self._linear((L["norm"] * normed * F.silu(z)).reshape(n, c.hv * c.dv), L["w_out"])

    @staticmethod
    def _mlp(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        return (F.silu(x @ gate.t()) * (x @ up.t())) @ down.t()

    def _moe(self, M: dict, x: torch.Tensor) -> torch.Tensor:
        """Qwen3_5MoeSparseMoeBlock: softmax top-k router (renormalised), routed experts in expert order (index_add,
        as Qwen3_5MoeExperts), plus the sigmoid-gated shared expert."""
        c = self.cfg
        probs = torch.softmax(x @ M["router"].t(), dim=-1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, c.top_k, dim=-1)
        if c.norm_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(c.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            gate, up = M["gate_up"][e][:c.moe_inter], M["gate_up"][e][c.moe_inter:]
            y = self._mlp(x[rows], gate, up, M["down"][e])
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out + torch.sigmoid(x @ M["shared_gate"].t()) * self._mlp(x, *M["shared"])

    @torch.no_grad()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Appends ids at the current position; returns their logits [len(ids), vocab] (float32)."""
        c, n = self.cfg, len(ids)
        # Text positions: all three mRoPE position ids equal, so every section rotates with the same angle.
        ids_t, cos, sin = ids_and_rope(ids, c.vocab, self.pos, self.inv_freq)
        h = self.embed[ids_t]
        for i, L in enumerate(self.layers):
            x = zc_rms_norm(h, L["ln1"], c.eps)
            h = h + (self._attention(i, L, x, cos, sin) if L["kind"] == "full_attention"
                     else self._gated_delta_net(i, L, x))
            x = zc_rms_norm(h, L["ln2"], c.eps)
            h = h + (self._moe(L["mlp"], x) if L["moe"] else self._mlp(x, *L["mlp"]))
        self.pos += n
        return zc_rms_norm(h, self.norm, c.eps) @ self.lm_head.t()

    # Same driving code as the dense oracle: reset, forward the prompt, then argmax one token at a time.
    prompt_logits = hf_reference.Reference.prompt_logits
    greedy = hf_reference.Reference.greedy


if __name__ == "__main__":
    raise SystemExit(hf_reference.main())
