#!/usr/bin/python3
"""An independent PyTorch oracle for the Mamba-2 hybrids: IBM's Granite 4.0-H (model_type "granitemoehybrid",
GraniteMoeHybridForCausalLM) and NVIDIA's Nemotron-H (model_type "nemotron_h", NemotronHForCausalLM). Written from the
equations of transformers 5.25's modeling_granitemoehybrid.py / modeling_nemotron_h.py / modeling_mamba2.py (not their
code); hf_reference.Reference.from_dir (and its CLI) hands these model types to GraniteHybridReference /
NemotronHReference here, which have its interface: forward(ids) appends at the current position (attention KV cache,
convolution window and SSM state carried between calls), reset(), prompt_logits(), greedy(), a long_context attribute
(unused).

The Mamba-2 mixer (both models; P = head_dim, N = d_state, G = n_groups, d_inner = heads * P, conv_dim = d_inner +
2 G N):
  zxbcdt = in_proj(u) [+ bias]: rows z (d_inner) | xBC (conv_dim) | dt (heads)
  xBC = silu(causal depthwise conv(xBC) + conv bias): the conv covers x, B and C (not z, not dt); out[t, ch] =
      sum_j w[ch, 0, j] * in[t - (K-1) + j, ch], the inputs before the first token zero; the carried conv state is
      the last K-1 pre-conv inputs
  x | B | C = xBC split [d_inner | G N | G N]; x per head [heads, P], B and C per group [G, N]; head h reads group
      h // (heads / G)
  dt = clamp(softplus(dt + dt_bias), time_step_limit) (default (0, inf): a no-op; transformers clamps in its chunked
      prefill only, not in its single-token step, and llama.cpp never clamps); A = -exp(A_log) [heads]
  per token, per head (S [P, N], float64 here): S = exp(dt A) S + dt x B^T; y = S C + D x  (D [heads], per head)
  gated RMSNorm (norm_before_gate false): g = y * silu(z); then RMS-normalised within each of G groups of d_inner / G
      consecutive channels (eps = the model's norm eps), times norm.weight [d_inner]
  out = out_proj(g) [+ bias]

Granite 4.0-H (GraniteMoeHybridConfig's defaults in brackets): vocab_size [32000], hidden_size [4096],
  num_hidden_layers [32], num_attention_heads [32], num_key_value_heads [= heads], head_dim [hidden / heads; no config
  field, a config.json one honoured], rms_norm_eps [1e-6], hidden_act [silu, the only one], attention_bias [false],
  embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling [all 1.0], num_local_experts [8; 0 =
  dense: shared_mlp only], num_experts_per_tok [2], intermediate_size [11008; the experts' width],
  shared_intermediate_size [1024], position_embedding_type [null; "rope" rotates q, k with rope_parameters /
  rope_theta [10000], anything else ("nope") is NoPE], layer_types (alias layers_block_type) [all mamba]: "mamba" /
  "attention" (the checkpoints' legacy names, which transformers maps to "linear_attention" / "full_attention"),
  mamba_n_heads [128], mamba_n_groups [1], mamba_d_state [256], mamba_d_head ["auto" = d_inner / heads], mamba_d_conv
  [4], mamba_expand [2] (d_inner = expand * hidden), mamba_conv_bias [true], mamba_proj_bias [false] (in_proj and
  out_proj), time_step_limit [(0, inf)], tie_word_embeddings [false; the released checkpoints set true].
  Weights (P = model.layers.i.): model.embed_tokens.weight [V, H], model.norm.weight [H], lm_head.weight [V, H] (unless
  tied); P.input_layernorm.weight, P.post_attention_layernorm.weight [H]; mamba layers P.mamba.: in_proj.weight
  [2 d_inner + 2 G N + heads, H], conv1d.weight [conv_dim, 1, K], conv1d.bias [conv_dim], dt_bias, A_log, D [heads],
  norm.weight [d_inner], out_proj.weight [H, d_inner]; attention layers P.self_attn.{q,k,v,o}_proj.weight [heads hd,
  H], [kv hd, H], [kv hd, H], [H, heads hd]; MoE P.block_sparse_moe.input_linear.weight [E, 2 I, H] (rows gate | up),
  output_linear.weight [E, H, I], router.layer.weight [E, H] (transformers 5 loads them as experts.gate_up_proj,
  experts.down_proj, router.weight; both spellings are read); P.shared_mlp.input_linear.weight [2 Is, H] (gate | up),
  shared_mlp.output_linear.weight [H, Is].
  Block: h = embed * embedding_multiplier; per layer h += residual_multiplier * mixer(rms(h)); h += residual_multiplier
  * (moe(x) + shared(x)), x = rms(h) (dense: shared(x) alone); logits = lm_head(rms(h)) / logits_scaling. RMSNorm w *
  x * rsqrt(mean x^2 + eps). Attention: GQA, scores * attention_multiplier (not hd^-0.5), causal softmax, o_proj.
  MoE: router logits, top-k, softmax over the k chosen logits (= softmax then renormalise), sum of weight_e *
  down_e(silu(gate_e x) * up_e x) in expert order; shared(x) = output_linear(silu(gate x) * up x).

Nemotron-H (NemotronHConfig's defaults): layers_block_type (alias layer_types; else hybrid_override_pattern, M =
  mamba, E = moe, * = attention, - = mlp) with one mixer per block: "linear_attention" (mamba), "full_attention",
  "mlp", "moe"; vocab_size [131072], hidden_size [4096], num_attention_heads [32], num_key_value_heads [8], head_dim
  (attention_head_dim) [128], layer_norm_epsilon [1e-5], mamba_num_heads [128], mamba_head_dim [64] (d_inner = heads *
  head_dim), ssm_state_size [128], n_groups (mamba_n_groups) [8], conv_kernel (mamba_d_conv) [4], use_conv_bias
  (mamba_conv_bias) [true], use_bias [false] (in_proj / out_proj), time_step_limit (mamba_dt_limit) [(0, inf)],
  intermediate_size [21504], mlp_bias [false], mlp_hidden_act [relu2], n_routed_experts (num_local_experts) [8],
  num_experts_per_tok [2], moe_intermediate_size [7688], moe_shared_expert_intermediate_size [7688], moe_latent_size
  [null], n_group [1], topk_group [1], norm_topk_prob [true], routed_scaling_factor [1.0], tie_word_embeddings [false].
  Weights (prefix model. or the checkpoints' backbone.): embeddings.weight, norm_f.weight, lm_head.weight; per layer
  layers.i.norm.weight and layers.i.mixer.*: the mamba tensors as Granite's; q/k/v/o_proj.weight (no biases, no RoPE,
  scale hd^-0.5); up_proj / down_proj (+ .bias with mlp_bias); moe: gate.weight [E, H], gate.e_score_correction_bias
  [E], experts.up_proj [E, I, L], experts.down_proj [E, L, I] (or per expert experts.j.{up,down}_proj.weight), L the
  latent width (hidden unless moe_latent_size: fc1_latent_proj [L, H], fc2_latent_proj [H, L]),
  shared_experts.{up,down}_proj.weight. Block: h += mixer(rms(h)); logits = lm_head(rms_f(h)). mlp(x) =
  down(relu(up x)^2). MoE: s = sigmoid(router x) (f32); choice = s + e_score_correction_bias; groups ranked by the sum
  of their top-2 choice scores, the best topk_group kept; top-k of choice among them; weights = s of the chosen,
  divided by their sum + 1e-20 when norm_topk_prob, times routed_scaling_factor; out = fc2(sum weight_e down_e(relu(up_e
  fc1 x))^2) + shared(x). mtp.* tensors are ignored.

Numerics: weights upcast to f32, everything f32 except the SSM recurrence (float64 state and products).

Checked (in a scratch folder, not in the repository) on random tiny checkpoints saved by transformers 5.25.0 (torch
2.15 CPU; weights ~ N(0, 1.2^2 / fan_in), norms 1 + 0.3 N(0, 1), A_log ~ U(-1, 1), D ~ N(0, 1), dt_bias ~ N(-1, 1)),
hidden 64, vocab 256, a 150-token prompt: Granite (a) 4 layers mamba, attention, mamba, mamba, heads 4 / kv 2, 8 SSM
heads of 16 in 2 groups, d_state 16, kernel 4, 4 experts top 2 (width 32), shared 48, multipliers 2 / 0.5 / 0.3 / 1.5,
NoPE, untied; (b) tied, position_embedding_type "rope", 1 group, 8 experts top 3; (c) dense (no experts), attention,
mamba, mamba, attention, 4 SSM heads of 32 in 4 groups; (a) with time_step_limit [0.05, 0.4]; Nemotron-H 6 layers
M E * - M E, 8 SSM heads of 16 in 2 groups, d_state 16, 8 experts top 2 in 2 expert groups (topk_group 1), routed
scale 2.5, with and without a latent MoE (24), mlp_bias and use_bias:
  * one forward call vs token by token vs uneven chunks: within 1.4e-5 (max over positions of max |diff| / max
    |logit|; f32 rounding); the CLI == in-process, the legacy configs (Granite's layers_block_type "mamba" /
    "attention" without time_step_limit; Nemotron-H's hybrid_override_pattern with mamba_n_groups / mamba_d_conv) ==
    the new ones, transformers 5's in-memory tensor names (Granite's experts.gate_up_proj / router.weight, Nemotron-H's
    model. prefix and stacked experts) == the checkpoints', all exactly;
  * against transformers (eager attention and experts; its chunked scan for the whole prompt, its single-token step
    after a 5-token prefill): f32 within 3.2e-5 (transformers' own f32 is 2.6e-5 off its float64 there), 16 greedy ids
    identical; both sides in float64 (transformers' float32 casts patched out): within 1.5e-14; with the finite
    time_step_limit within 2e-6 of transformers' whole-prompt (clamping) path, which its unclamped single-token path
    leaves by 1.0;
  * this f32 reference vs float64: 4e-7 to 1.2e-6 at a typical position, 6.5e-6 at the worst;
  * llama.cpp (llama-cpp-python 0.3.36, f32 KV cache) on gguf_py_writer.py's GGUF of (a) and of (c) with
    intermediate_size = shared_intermediate_size: within 7.5e-6, 16 greedy ids identical; of (b): NoPE (llama.cpp
    turns RoPE off for every granitemoehybrid with Mamba layers), within 3.5e-6 of this file with RoPE off; (c) as
    released (intermediate_size 32 != shared 48) does not load (llama.cpp sizes the dense MLP by
    feed_forward_length = intermediate_size).
Nemotron-H re-checked against transformers 5.25.0 (vocab 320, a 40-token prompt): M * - M - within 1.9e-6 (whole) /
4.2e-6 (cached), M E * - M E (2 expert groups, scale 2.5) 1.4e-6 / 1.6e-6; llama.cpp's nemotron_h on gguf_py_mamba2.py's
GGUF of M * - M - within 2.7e-6 (max |diff| 1.0e-5), greedy argmax identical at every position.
"""

from __future__ import annotations

import json
import math
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

import hf_reference  # tests/reference is on sys.path (the CLI's own folder, or conftest)
from hybrid_reference import _Weights, ids_and_rope

MODEL_TYPES = hf_reference.MAMBA2_MODEL_TYPES  # granitemoehybrid, nemotron_h
LEGACY_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}  # transformers' remap_legacy_layer_types
PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}  # Nemotron-H's override pattern


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
    y = x @ w.t()
    return y if b is None else y + b


def _time_step_limit(raw) -> tuple:
    """(lo, hi); transformers 5 writes an infinite bound as {"__float__": "Infinity"}."""
    lo, hi = (0.0, math.inf) if raw is None else raw
    return tuple(float(v["__float__"] if isinstance(v, dict) else v) for v in (lo, hi))


class Mamba2Dims:
    """One model's Mamba-2 mixer shape."""

    def __init__(self, hidden: int, heads: int, head_dim: int, groups: int, d_state: int, conv_k: int,
                 conv_bias: bool, proj_bias: bool, eps: float, dt_limit: tuple):
        self.hidden, self.heads, self.head_dim, self.groups, self.d_state = hidden, heads, head_dim, groups, d_state
        self.conv_k, self.conv_bias, self.proj_bias = conv_k, conv_bias, proj_bias
        self.eps, self.dt_limit = eps, dt_limit
        self.d_inner = heads * head_dim
        self.conv_dim = self.d_inner + 2 * groups * d_state
        if heads % groups or self.d_inner % groups:
            raise ValueError(f"mamba heads ({heads}) must be a multiple of its groups ({groups})")


def load_mamba2(get, p: str, d: Mamba2Dims) -> dict:
    proj = d.d_inner + d.conv_dim + d.heads
    return {"w_in": get(p + "in_proj.weight", (proj, d.hidden)), "b_in": get(p + "in_proj.bias", (proj,), d.proj_bias),
            "conv": get(p + "conv1d.weight", (d.conv_dim, 1, d.conv_k))[:, 0, :],  # [channels, K]
            "b_conv": get(p + "conv1d.bias", (d.conv_dim,), d.conv_bias),
            "dt_bias": get(p + "dt_bias", (d.heads,)), "A_log": get(p + "A_log", (d.heads,)),
            "D": get(p + "D", (d.heads,)),
            "norm": get(p + "norm.weight", (d.d_inner,)),
            "w_out": get(p + "out_proj.weight", (d.hidden, d.d_inner)),
            "b_out": get(p + "out_proj.bias", (d.hidden,), d.proj_bias)}


def mamba2_state(d: Mamba2Dims) -> dict:
    """The empty state: K-1 zero conv inputs, a zero SSM state per head [heads, P, N] (float64)."""
    return {"conv": torch.zeros(d.conv_k - 1, d.conv_dim),
            "ssm": torch.zeros(d.heads, d.head_dim, d.d_state, dtype=torch.float64)}


def ssm_scan(state: dict, d: Mamba2Dims, x, B, C, dt, A, D) -> torch.Tensor:
    """The selective scan, one token at a time, in float64. x [n, heads, P], B, C [n, G, N], dt [n, heads] (after
    softplus and clamp), A, D [heads]; returns y [n, heads, P] in x's dtype and carries S [heads, P, N]."""
    rep, dtype = d.heads // d.groups, x.dtype  # head h reads group h // rep
    x, dt, A, D = x.double(), dt.double(), A.double(), D.double()
    B = B.double().repeat_interleave(rep, dim=1)  # [n, heads, N]
    C = C.double().repeat_interleave(rep, dim=1)
    S = state["ssm"]
    y = torch.empty_like(x)
    for t in range(x.shape[0]):
        decay = torch.exp(dt[t] * A)                                            # [heads]
        S = S * decay[:, None, None] + (dt[t][:, None] * x[t])[:, :, None] * B[t][:, None, :]  # + dt x B^T
        y[t] = torch.einsum("hpn,hn->hp", S, C[t]) + D[:, None] * x[t]         # S C + D x
    state["ssm"] = S
    return y.to(dtype)


def mamba2_mixer(L: dict, d: Mamba2Dims, x: torch.Tensor, state: dict) -> torch.Tensor:
    """The Mamba-2 mixer on x [n, hidden] (already normed); updates state (conv window, SSM state)."""
    n = x.shape[0]
    z, xbc, dt = _linear(x, L["w_in"], L["b_in"]).split([d.d_inner, d.conv_dim, d.heads], dim=-1)
    padded = torch.cat((state["conv"], xbc))  # [K-1+n, conv_dim]
    state["conv"] = padded[padded.shape[0] - (d.conv_k - 1):].clone()
    windows = padded.unfold(0, d.conv_k, 1)  # [n, conv_dim, K]: row t holds inputs t .. t+K-1 of padded
    assert windows.shape[0] == n
    conv = (windows * L["conv"]).sum(-1)
    xbc = F.silu(conv if L["b_conv"] is None else conv + L["b_conv"])
    xs, B, C = xbc.split([d.d_inner, d.groups * d.d_state, d.groups * d.d_state], dim=-1)
    dt = F.softplus(dt + L["dt_bias"]).clamp(d.dt_limit[0], d.dt_limit[1])
    A = -torch.exp(L["A_log"])
    y = ssm_scan(state, d, xs.reshape(n, d.heads, d.head_dim), B.reshape(n, d.groups, d.d_state),
                 C.reshape(n, d.groups, d.d_state), dt, A, L["D"]).reshape(n, d.d_inner)
    # Gated RMSNorm: gate first, then normalise within each group of d_inner / G channels.
    g = (y * F.silu(z)).reshape(n, d.groups, d.d_inner // d.groups)
    g = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + d.eps)).reshape(n, d.d_inner)
    return _linear(L["norm"] * g, L["w_out"], L["b_out"])


class _Mamba2Hybrid:
    """What both models share: caches, causal GQA attention, the driving code."""

    def reset(self) -> None:
        c = self.cfg
        self.cache_k: List[Optional[torch.Tensor]] = [None] * c.layers
        self.cache_v: List[Optional[torch.Tensor]] = [None] * c.layers
        self.state = [mamba2_state(c.mamba) if t == "linear_attention" else None for t in c.layer_types]
        self.pos = 0

    def _attend(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        """q [n, heads, hd], k / v [n, kv, hd] appended to layer i's cache; causal softmax(q k^T * scale) v."""
        c, n = self.cfg, q.shape[0]
        self.cache_k[i] = k if self.cache_k[i] is None else torch.cat((self.cache_k[i], k))
        self.cache_v[i] = v if self.cache_v[i] is None else torch.cat((self.cache_v[i], v))
        rep = c.heads // c.kv_heads  # query head h reads KV head h // rep (repeat_kv)
        keys, values = self.cache_k[i].repeat_interleave(rep, dim=1), self.cache_v[i].repeat_interleave(rep, dim=1)
        total = keys.shape[0]
        scores = torch.einsum("qhd,khd->hqk", q, keys) * scale
        causal = torch.arange(total)[None, :] <= torch.arange(total - n, total)[:, None]  # [n, total]
        probs = torch.softmax(scores.masked_fill(~causal[None], float("-inf")), dim=-1)
        return torch.einsum("hqk,khd->qhd", probs, values).reshape(n, c.heads * c.head_dim)

    def _check_unread(self, get: _Weights) -> None:
        unread = [n for n in get.unread() if not n.startswith(("mtp.", "model.mtp.", "backbone.mtp."))]
        if unread:
            raise ValueError(f"tensors this reference does not read: {unread[:8]}{' ...' if len(unread) > 8 else ''}")

    prompt_logits = hf_reference.Reference.prompt_logits
    greedy = hf_reference.Reference.greedy


class GraniteHybridConfig:
    """Granite 4.0-H's hyper-parameters with GraniteMoeHybridConfig's defaults."""

    def __init__(self, raw: dict):
        g = raw.get
        if g("model_type") != "granitemoehybrid":
            raise ValueError(f"model_type {g('model_type')!r} is not granitemoehybrid")
        self.vocab, self.hidden = int(g("vocab_size", 32000)), int(g("hidden_size", 4096))
        self.layers, self.heads = int(g("num_hidden_layers", 32)), int(g("num_attention_heads", 32))
        self.kv_heads = int(g("num_key_value_heads") or self.heads)
        self.head_dim = int(g("head_dim") or self.hidden // self.heads)
        self.eps, self.bias = float(g("rms_norm_eps", 1e-6)), bool(g("attention_bias", False))
        if g("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {g('hidden_act')!r} is not supported (silu)")
        self.emb_mult, self.res_mult = float(g("embedding_multiplier", 1.0)), float(g("residual_multiplier", 1.0))
        self.attn_mult, self.logits_scaling = float(g("attention_multiplier", 1.0)), float(g("logits_scaling", 1.0))
        self.experts, self.top_k = int(g("num_local_experts", 8)), int(g("num_experts_per_tok", 2))
        self.intermediate = int(g("intermediate_size", 11008))
        self.shared_inter = int(g("shared_intermediate_size", 1024))
        self.tied = bool(g("tie_word_embeddings", False))
        types = g("layer_types") or g("layers_block_type") or ["linear_attention"] * self.layers
        self.layer_types = [LEGACY_TYPES.get(t, t) for t in types]
        if len(self.layer_types) != self.layers or set(self.layer_types) - {"linear_attention", "full_attention"}:
            raise ValueError(f"layer_types {types} do not describe {self.layers} layers")
        self.rope = g("position_embedding_type") == "rope"
        rp = g("rope_parameters") or g("rope_scaling") or {}
        if rp.get("rope_type", rp.get("type", "default")) != "default":
            raise ValueError(f"rope {rp} is not supported (default)")
        self.theta = float(rp.get("rope_theta", g("rope_theta", 10000.0)))
        d_inner, heads = int(g("mamba_expand", 2)) * self.hidden, int(g("mamba_n_heads", 128))
        d_head = g("mamba_d_head", "auto")
        d_head = d_inner // heads if d_head == "auto" else int(d_head)
        if d_head * heads != d_inner:
            raise ValueError(f"mamba_d_head {d_head} * mamba_n_heads {heads} != mamba_expand * hidden_size {d_inner}")
        self.mamba = Mamba2Dims(self.hidden, heads, d_head, int(g("mamba_n_groups", 1)), int(g("mamba_d_state", 256)),
                                int(g("mamba_d_conv", 4)), bool(g("mamba_conv_bias", True)),
                                bool(g("mamba_proj_bias", False)), self.eps, _time_step_limit(g("time_step_limit")))


class GraniteHybridReference(_Mamba2Hybrid):
    """Granite 4.0-H in float32 (the scan in float64) with its caches. Construct with from_dir()."""

    def __init__(self, cfg: GraniteHybridConfig, tensors: Dict[str, np.ndarray]):
        self.cfg = c = cfg
        get = _Weights(tensors)
        self.embed = get("model.embed_tokens.weight", (c.vocab, c.hidden))
        self.layers = []
        for i, kind in enumerate(c.layer_types):
            lp = f"model.layers.{i}."
            L = {"kind": kind, "ln1": get(lp + "input_layernorm.weight", (c.hidden,)),
                 "ln2": get(lp + "post_attention_layernorm.weight", (c.hidden,)),
                 "shared": (get(lp + "shared_mlp.input_linear.weight", (2 * c.shared_inter, c.hidden)),
                            get(lp + "shared_mlp.output_linear.weight", (c.hidden, c.shared_inter)))}
            L.update(load_mamba2(get, lp + "mamba.", c.mamba) if kind == "linear_attention"
                     else self._load_attention(get, lp + "self_attn."))
            if c.experts > 0:
                L["moe"] = self._load_moe(get, lp + "block_sparse_moe.")
            self.layers.append(L)
        self.norm = get("model.norm.weight", (c.hidden,))
        self.lm_head = self.embed if c.tied else get("lm_head.weight", (c.vocab, c.hidden))
        self._check_unread(get)
        self.inv_freq = hf_reference.default_inv_freq(c.head_dim, c.theta)
        self.long_context = False  # the interface of hf_reference.Reference; no long-context switch here
        self.reset()

    def _load_attention(self, get, a: str) -> dict:
        c = self.cfg
        q_out, kv_out = c.heads * c.head_dim, c.kv_heads * c.head_dim
        return {"wq": get(a + "q_proj.weight", (q_out, c.hidden)), "wk": get(a + "k_proj.weight", (kv_out, c.hidden)),
                "wv": get(a + "v_proj.weight", (kv_out, c.hidden)), "wo": get(a + "o_proj.weight", (c.hidden, q_out)),
                "bq": get(a + "q_proj.bias", (q_out,), c.bias), "bk": get(a + "k_proj.bias", (kv_out,), c.bias),
                "bv": get(a + "v_proj.bias", (kv_out,), c.bias), "bo": get(a + "o_proj.bias", (c.hidden,), c.bias)}

    def _load_moe(self, get, m: str) -> dict:
        """The checkpoints' names (input_linear / output_linear / router.layer) or transformers 5's."""
        c = self.cfg
        e, i, h = c.experts, c.intermediate, c.hidden
        new = m + "experts.gate_up_proj" in get.t
        return {"gate_up": get(m + ("experts.gate_up_proj" if new else "input_linear.weight"), (e, 2 * i, h)),
                "down": get(m + ("experts.down_proj" if new else "output_linear.weight"), (e, h, i)),
                "router": get(m + ("router.weight" if new else "router.layer.weight"), (e, h))}

    @classmethod
    def from_dir(cls, model_dir: str) -> "GraniteHybridReference":
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = GraniteHybridConfig(json.load(f))
        return cls(cfg, hf_reference.load_hf_tensors(model_dir))

    def _attention(self, i: int, L: dict, x: torch.Tensor, cos, sin) -> torch.Tensor:
        c, n = self.cfg, x.shape[0]
        q = _linear(x, L["wq"], L["bq"]).view(n, c.heads, c.head_dim)
        k = _linear(x, L["wk"], L["bk"]).view(n, c.kv_heads, c.head_dim)
        v = _linear(x, L["wv"], L["bv"]).view(n, c.kv_heads, c.head_dim)
        if c.rope:
            q = q * cos + hf_reference.rotate_half(q) * sin
            k = k * cos + hf_reference.rotate_half(k) * sin
        return _linear(self._attend(i, q, k, v, c.attn_mult), L["wo"], L["bo"])

    def _ffn(self, L: dict, x: torch.Tensor) -> torch.Tensor:
        """Routed experts (softmax over the top-k logits, in expert order) plus the shared MLP."""
        c = self.cfg
        gate_up, down = L["shared"]
        g, u = _linear(x, gate_up).chunk(2, dim=-1)
        out = _linear(F.silu(g) * u, down)
        if "moe" not in L:
            return out
        M = L["moe"]
        top, chosen = torch.topk(x @ M["router"].t(), c.top_k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        routed = torch.zeros_like(x)
        for e in range(c.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            g, u = _linear(x[rows], M["gate_up"][e]).chunk(2, dim=-1)
            routed.index_add_(0, rows, _linear(F.silu(g) * u, M["down"][e]) * weights[rows, slot, None])
        return routed + out

    @torch.no_grad()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Appends ids at the current position; returns their logits [len(ids), vocab] (float32)."""
        c = self.cfg
        ids_t, cos, sin = ids_and_rope(ids, c.vocab, self.pos, self.inv_freq)
        h = self.embed[ids_t] * c.emb_mult
        for i, L in enumerate(self.layers):
            x = rms_norm(h, L["ln1"], c.eps)
            y = mamba2_mixer(L, c.mamba, x, self.state[i]) if L["kind"] == "linear_attention" else \
                self._attention(i, L, x, cos, sin)
            h = h + y * c.res_mult
            h = h + self._ffn(L, rms_norm(h, L["ln2"], c.eps)) * c.res_mult
        self.pos += len(ids)
        return rms_norm(h, self.norm, c.eps) @ self.lm_head.t() / c.logits_scaling


class NemotronHConfig:
    """Nemotron-H's hyper-parameters with NemotronHConfig's defaults and its legacy keys."""

    def __init__(self, raw: dict):
        g = raw.get
        if g("model_type") != "nemotron_h":
            raise ValueError(f"model_type {g('model_type')!r} is not nemotron_h")

        def pick(new, old, default):
            return g(old) if old in raw else g(new, default)  # NemotronHConfig pops the legacy key over the new

        types = g("layers_block_type") or g("layer_types")
        if types is None and "hybrid_override_pattern" in raw:
            types = [PATTERN[ch] for ch in raw["hybrid_override_pattern"]]
        types = types or ["linear_attention", "moe", "full_attention", "mlp"]
        self.layer_types = [LEGACY_TYPES.get(t, t) for t in types]
        if set(self.layer_types) - {"linear_attention", "full_attention", "mlp", "moe"}:
            raise ValueError(f"layers_block_type {types} holds an unknown type")
        self.layers = len(self.layer_types)  # num_hidden_layers is ignored, as NemotronHConfig ignores it
        self.vocab, self.hidden = int(g("vocab_size", 131072)), int(g("hidden_size", 4096))
        self.heads = int(g("num_attention_heads", 32))
        self.kv_heads = int(g("num_key_value_heads", 8) or self.heads)
        self.head_dim = int(g("head_dim") or g("attention_head_dim") or 128)  # the older configs' name
        self.eps = float(g("layer_norm_epsilon", 1e-5))
        if g("mlp_hidden_act", "relu2") != "relu2" or g("mamba_hidden_act", "silu") != "silu":
            raise ValueError("only mlp_hidden_act relu2 and mamba_hidden_act silu are supported")
        self.intermediate, self.mlp_bias = int(g("intermediate_size", 21504)), bool(g("mlp_bias", False))
        self.experts = int(g("n_routed_experts", g("num_local_experts", 8)))
        self.top_k, self.moe_inter = int(g("num_experts_per_tok", 2)), int(g("moe_intermediate_size", 7688))
        self.shared_inter = int(g("moe_shared_expert_intermediate_size", 7688))
        self.latent = g("moe_latent_size")
        self.n_group, self.topk_group = int(g("n_group", 1)), int(g("topk_group", 1))
        self.norm_topk, self.scaling = bool(g("norm_topk_prob", True)), float(g("routed_scaling_factor", 1.0))
        self.mamba = Mamba2Dims(self.hidden, int(g("mamba_num_heads", 128)), int(g("mamba_head_dim", 64)),
                                int(pick("n_groups", "mamba_n_groups", 8)), int(g("ssm_state_size", 128)),
                                int(pick("conv_kernel", "mamba_d_conv", 4)),
                                bool(pick("use_conv_bias", "mamba_conv_bias", True)), bool(g("use_bias", False)),
                                self.eps, _time_step_limit(pick("time_step_limit", "mamba_dt_limit", None)))


class NemotronHReference(_Mamba2Hybrid):
    """Nemotron-H in float32 (the scan in float64) with its caches. Construct with from_dir()."""

    def __init__(self, cfg: NemotronHConfig, tensors: Dict[str, np.ndarray]):
        self.cfg = c = cfg
        get = _Weights(tensors)
        p = "backbone." if "backbone.embeddings.weight" in tensors else "model."
        self.embed = get(p + "embeddings.weight", (c.vocab, c.hidden))
        self.layers = []
        for i, kind in enumerate(c.layer_types):
            m = f"{p}layers.{i}.mixer."
            L = {"kind": kind, "ln": get(f"{p}layers.{i}.norm.weight", (c.hidden,))}
            if kind == "linear_attention":
                L.update(load_mamba2(get, m, c.mamba))
            elif kind == "full_attention":
                q_out, kv_out = c.heads * c.head_dim, c.kv_heads * c.head_dim
                L.update(wq=get(m + "q_proj.weight", (q_out, c.hidden)),
                         wk=get(m + "k_proj.weight", (kv_out, c.hidden)),
                         wv=get(m + "v_proj.weight", (kv_out, c.hidden)),
                         wo=get(m + "o_proj.weight", (c.hidden, q_out)))
            elif kind == "mlp":
                L["mlp"] = self._load_mlp(get, m, c.intermediate, c.mlp_bias)
            else:
                L.update(self._load_moe(get, m))
            self.layers.append(L)
        self.norm = get(p + "norm_f.weight", (c.hidden,))
        # NemotronHForCausalLM ties nothing (_tied_weights_keys is empty), whatever tie_word_embeddings says.
        self.lm_head = get("lm_head.weight", (c.vocab, c.hidden))
        self._check_unread(get)
        self.long_context = False
        self.reset()

    def _load_mlp(self, get, m: str, inter: int, bias: bool) -> tuple:
        h = self.cfg.hidden
        return (get(m + "up_proj.weight", (inter, h)), get(m + "up_proj.bias", (inter,), bias),
                get(m + "down_proj.weight", (h, inter)), get(m + "down_proj.bias", (h,), bias))

    def _load_moe(self, get, m: str) -> dict:
        c = self.cfg
        e, i, lat = c.experts, c.moe_inter, int(c.latent or c.hidden)
        if m + "experts.up_proj" in get.t:
            up, down = get(m + "experts.up_proj", (e, i, lat)), get(m + "experts.down_proj", (e, lat, i))
        else:
            up = torch.stack([get(f"{m}experts.{j}.up_proj.weight", (i, lat)) for j in range(e)])
            down = torch.stack([get(f"{m}experts.{j}.down_proj.weight", (lat, i)) for j in range(e)])
        L = {"router": get(m + "gate.weight", (e, c.hidden)), "up": up, "down": down,
             "bias": get(m + "gate.e_score_correction_bias", (e,)),
             "shared": self._load_mlp(get, m + "shared_experts.", c.shared_inter, c.mlp_bias)}
        if c.latent:
            L["fc1"], L["fc2"] = get(m + "fc1_latent_proj.weight", (lat, c.hidden)), \
                get(m + "fc2_latent_proj.weight", (c.hidden, lat))
            L["b1"], L["b2"] = get(m + "fc1_latent_proj.bias", (lat,), c.mlp_bias), \
                get(m + "fc2_latent_proj.bias", (c.hidden,), c.mlp_bias)
        return L

    @classmethod
    def from_dir(cls, model_dir: str) -> "NemotronHReference":
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = NemotronHConfig(json.load(f))
        return cls(cfg, hf_reference.load_hf_tensors(model_dir))

    @staticmethod
    def _mlp(x: torch.Tensor, up, b_up, down, b_down) -> torch.Tensor:
        return _linear(torch.relu(_linear(x, up, b_up)).square(), down, b_down)

    def _route(self, L: dict, x: torch.Tensor) -> tuple:
        """The sigmoid router with its score-correction bias, group-limited top-k; (weights, chosen) [n, k]."""
        c = self.cfg
        scores = torch.sigmoid(x @ L["router"].t())
        choice = scores + L["bias"]
        per = c.experts // c.n_group
        group_scores = choice.view(-1, c.n_group, per).topk(min(2, per), dim=-1)[0].sum(-1)
        keep = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(c.topk_group, dim=-1)[1], 1.0)
        keep = keep.bool()[:, :, None].expand(-1, -1, per).reshape(-1, c.experts)
        chosen = choice.masked_fill(~keep, float("-inf")).topk(c.top_k, dim=-1)[1]
        weights = scores.gather(1, chosen)
        if c.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return weights * c.scaling, chosen

    def _moe(self, L: dict, x: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        weights, chosen = self._route(L, x)
        xl = _linear(x, L["fc1"], L["b1"]) if c.latent else x
        routed = torch.zeros_like(xl)
        for e in range(c.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            y = _linear(torch.relu(_linear(xl[rows], L["up"][e])).square(), L["down"][e])
            routed.index_add_(0, rows, y * weights[rows, slot, None])
        routed = _linear(routed, L["fc2"], L["b2"]) if c.latent else routed
        return routed + self._mlp(x, *L["shared"])

    @torch.no_grad()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Appends ids at the current position; returns their logits [len(ids), vocab] (float32)."""
        c, n = self.cfg, len(ids)
        ids_t, _, _ = ids_and_rope(ids, c.vocab, self.pos, torch.zeros(0))  # NoPE: only the ids' check
        h = self.embed[ids_t]
        for i, L in enumerate(self.layers):
            x = rms_norm(h, L["ln"], c.eps)
            if L["kind"] == "linear_attention":
                y = mamba2_mixer(L, c.mamba, x, self.state[i])
            elif L["kind"] == "full_attention":
                q = (x @ L["wq"].t()).view(n, c.heads, c.head_dim)
                k = (x @ L["wk"].t()).view(n, c.kv_heads, c.head_dim)
                v = (x @ L["wv"].t()).view(n, c.kv_heads, c.head_dim)
                y = self._attend(i, q, k, v, c.head_dim ** -0.5) @ L["wo"].t()
            else:
                y = self._mlp(x, *L["mlp"]) if L["kind"] == "mlp" else self._moe(L, x)
            h = h + y
        self.pos += n
        return rms_norm(h, self.norm, c.eps) @ self.lm_head.t()


if __name__ == "__main__":
    raise SystemExit(hf_reference.main())
