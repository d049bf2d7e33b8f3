#!/usr/bin/python3
"""An independent PyTorch oracle for Liquid AI's LFM2 text models (model_type "lfm2", Lfm2ForCausalLM) and LFM2-MoE
("lfm2_moe", Lfm2MoeForCausalLM): a hybrid of gated short-convolution layers ("conv") and GQA attention layers
("full_attention"). Written from the equations of transformers 5.25's modeling_lfm2.py / configuration_lfm2.py /
modeling_lfm2_moe.py (not their code); hf_reference.Reference.from_dir (and its CLI) hands both model types to
Lfm2Reference here, which has the same interface: forward(ids) appends at the
current position (attention KV cache and convolution windows carried between calls), reset(), prompt_logits(),
greedy(), a long_context attribute (unused).

Config (Lfm2Config's defaults in brackets; keys at the top level of config.json):
  vocab_size [65536], hidden_size [2560], num_hidden_layers [32], num_attention_heads [32], num_key_value_heads [8],
  head_dim [hidden_size / num_attention_heads; Lfm2Config has no such field, a config.json one is honoured as
  transformers' getattr does], norm_eps [1e-5], conv_L_cache [3] (the kernel length), conv_bias [false],
  tie_word_embeddings [true] (the legacy key tie_embedding wins when present), intermediate_size [12288] (the legacy
  key block_ff_dim wins when present), block_auto_adjust_ff_dim [true], block_ffn_dim_multiplier [1.0],
  block_multiple_of [256], layer_types (else full_attn_idxs: those layers "full_attention", the rest "conv"; with
  neither, every layer attention), rope_parameters {rope_type "default" only, rope_theta} else the top-level
  rope_theta, else 1e6 (Lfm2Config.default_theta).
  The MLP width: I = intermediate_size; when block_auto_adjust_ff_dim: I = int(2 * I / 3), and then, only when
  block_ffn_dim_multiplier is not null, I = int(multiplier * I) rounded up to a multiple of block_multiple_of
  (LFM2-1.2B: 12288 -> 8192; LFM2.5-350M: 6656 -> 4437 -> 4608). llama.cpp's converter rounds up even when the
  multiplier is null; no published config has a null multiplier.

Weights (P = "model."; any tensor left unread is an error; a tied checkpoint's lm_head.weight is ignored):
  P.embed_tokens.weight [V, H], P.embedding_norm.weight [H] (the FINAL norm, after the last layer, despite its name),
  lm_head.weight [V, H] (unless tied)
  per layer P.layers.i.: operator_norm.weight [H] (before the mixer), ffn_norm.weight [H] (before the MLP),
      feed_forward.w1.weight [I, H] (gate), feed_forward.w3.weight [I, H] (up), feed_forward.w2.weight [H, I] (down)
  conv layers: conv.in_proj.weight [3H, H] (rows B | C | x), conv.conv.weight [H, 1, L] (depthwise Conv1d),
      conv.out_proj.weight [H, H]; with conv_bias also conv.in_proj.bias [3H], conv.conv.bias [H], conv.out_proj.bias
      [H] (Lfm2ShortConv passes conv_bias to all three)
  attention layers: self_attn.q_proj.weight [heads*hd, H], k_proj / v_proj [kv*hd, H], out_proj [H, heads*hd] (no
      biases), self_attn.q_layernorm.weight / k_layernorm.weight [hd]

Semantics:
  RMSNorm (every norm): w * (x * rsqrt(mean(x^2) + eps)) -- the plain weight, not 1 + w.
  per layer: h = h + mixer(operator_norm(h)); h = h + w2(silu(w1 x) * w3 x), x = ffn_norm(h); after the last layer
      embedding_norm, then lm_head (tied: embed_tokens).
  short conv: B, C, x = in_proj(u) split in three along the channels; v = B * x; causal depthwise conv over time,
      conv[t, ch] = sum_{j<L} w[ch, 0, j] * v[t - (L-1) + j, ch] (+ bias[ch]), v before the first token = 0, no
      activation; y = out_proj(C * conv). The carried state per layer is the last L-1 rows of v.
  attention: q, k per head RMSNorm-ed (q_layernorm / k_layernorm over head_dim) and then RoPE (rotate_half, the
      whole head, inv_freq = 1 / theta^(2i / hd)); causal softmax(q k^T * hd^-0.5) v with GQA (query head h reads
      KV head h // (heads / kv)); out_proj.
  Numerics: weights upcast to f32, everything in f32.

LFM2-MoE (Lfm2MoeConfig) is LFM2 with these differences:
  * the dense MLP is intermediate_size wide as stated (no block_* width rule) and only in the first num_dense_layers
    [2] layers; every later layer has a sparse MoE block instead (feed_forward.*);
  * MoE: P.layers.i.feed_forward.gate.weight [E, H] (router), feed_forward.expert_bias [E] (with use_expert_bias
    [true]), experts per expert feed_forward.experts.j.w1 / w3 [Im, H] (gate / up), w2 [H, Im] (the checkpoints',
    and what save_pretrained writes), or stacked experts.gate_up_proj [E, 2 Im, H] (rows gate | up) and
    experts.down_proj [E, H, Im] (transformers 5's in-memory form); num_experts [32], num_experts_per_tok [4],
    moe_intermediate_size [1792], norm_topk_prob [true], routed_scaling_factor [1.0];
    s = sigmoid(router x) (f32); the top-k experts chosen by s + expert_bias (the bias selects only); weights = s of
    the chosen, divided by (their sum + 1e-6) when norm_topk_prob, times routed_scaling_factor; out = sum of weight_e
    * w2_e(silu(w1_e x) * w3_e x) in expert order;
  * Lfm2MoeConfig's defaults: hidden_size [2048], intermediate_size [7168], the rest as Lfm2Config's (tie_embedding
    included).

Checked (in a scratch folder, not in the repository) on random tiny checkpoints made by transformers 5.25.0's
Lfm2ForCausalLM (weights ~ N(0, 1.5^2 / fan_in), norms 1 + 0.3 N(0, 1)): (a) hidden 64, 6 layers conv, conv, attn, conv,
attn, conv, heads 4 / kv 2, L 3, intermediate 192 -> 128 (multiple_of 16), tied, theta 1e6; (b) 4 layers from
full_attn_idxs [1, 3], heads 8 / kv 2, L 4, 100 -> 96 (multiple_of 32), untied, theta 1e4, eps 1e-6; (c) hidden 48,
conv_bias true, no auto-adjust (80), MHA; and (a) rewritten with the legacy keys of LFM2-1.2B's config.json
(block_ff_dim, full_attn_idxs, tie_embedding, top-level rope_theta); vocab 637, a 150-token prompt:
  * one forward call vs token by token vs uneven chunks: within 1.3e-5 (logits up to 8; f32 rounding); the CLI ==
    in-process exactly; the legacy-key config == (a) exactly;
  * against transformers (torch 2.15 CPU, eager attention, its whole-prompt path and its cached one: 5-token prefill,
    then single tokens): f32 logits within 3.6e-6 (max over positions of max |diff| / max |logit|), 16 greedy ids
    identical; both sides in float64 (transformers' float32 casts in RMSNorm, rotary and softmax patched out):
    within 3.1e-15, so the semantics agree and the f32 gaps are rounding;
  * llama.cpp (llama-cpp-python 0.3.36) on gguf_py_writer.py's GGUF of (a), (b) and the legacy (a): within 2.8e-6 of
    this file's logits, 16 greedy ids identical ((c) is refused: llama.cpp's lfm2 has no conv biases).
LFM2-MoE, checked against transformers 5.25.0 (Lfm2MoeForCausalLM, eager, saved by save_pretrained with per-expert
tensors): hidden 64, 5 layers conv, attn, conv, conv, attn, heads 4 / kv 2, L 3, intermediate 96, 8 experts top 2
(32 wide), expert_bias ~ 0.2 N(0, 1), vocab 320, a 40-token prompt: (d) 2 dense layers, tied, norm_topk_prob true,
scale 1: within 1.5e-6 of its whole-prompt logits, 2.2e-6 of its cached ones; (e) 1 dense layer, untied,
norm_topk_prob false, routed_scaling_factor 2.5: within 2.0e-6 / 2.6e-6; one call vs token by token within 1.5e-6;
llama.cpp's lfm2moe on gguf_py_hybrids.py's GGUF of (d): within 3.9e-6 (max |diff| 1.4e-5), argmax identical at every
position ((e) is refused: llama.cpp's lfm2moe always renormalises and reads no routed scaling).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

import hf_reference  # tests/reference is on sys.path (the CLI's own folder, or conftest)
from hybrid_reference import _Weights, ids_and_rope, stacked_experts

MODEL_TYPES = hf_reference.LFM2_MODEL_TYPES  # lfm2, lfm2_moe


def lfm2_mlp_width(intermediate: int, auto_adjust: bool, multiplier: Optional[float], multiple_of: int) -> int:
    """Lfm2MLP's width rule (block_auto_adjust_ff_dim / block_ffn_dim_multiplier / block_multiple_of)."""
    width = intermediate
    if auto_adjust:
        width = int(2 * width / 3)
        if multiplier is not None:
            width = int(multiplier * width)
            width = multiple_of * ((width + multiple_of - 1) // multiple_of)
    return width


def _mlp(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return (F.silu(x @ w1.t()) * (x @ w3.t())) @ w2.t()


class Lfm2Config:
    """The model's hyper-parameters with Lfm2Config's / Lfm2MoeConfig's defaults and the legacy-key handling."""

    def __init__(self, raw: dict):
        self.model_type = raw.get("model_type")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type {self.model_type!r} is not an LFM2 type ({', '.join(MODEL_TYPES)})")
        self.moe = self.model_type == "lfm2_moe"
        self.vocab = int(raw.get("vocab_size", 65536))
        self.hidden = int(raw.get("hidden_size", 2048 if self.moe else 2560))
        self.layers = int(raw.get("num_hidden_layers", 32))
        self.heads = int(raw.get("num_attention_heads", 32))
        self.kv_heads = int(raw.get("num_key_value_heads", 8))
        self.head_dim = int(raw.get("head_dim") or self.hidden // self.heads)
        self.eps = float(raw.get("norm_eps", 1e-5))
        self.conv_l = int(raw.get("conv_L_cache", 3))
        self.conv_bias = bool(raw.get("conv_bias", False))
        self.tied = bool(raw.get("tie_embedding", raw.get("tie_word_embeddings", True)))
        if self.moe:  # Lfm2MoeMLP takes intermediate_size as it is (no block_* width rule)
            self.intermediate = int(raw.get("intermediate_size", 7168))
            self._moe_fields(raw)
        else:
            self.intermediate_size = int(raw.get("block_ff_dim", raw.get("intermediate_size", 12288)))
            self.auto_adjust = bool(raw.get("block_auto_adjust_ff_dim", True))
            mult = raw.get("block_ffn_dim_multiplier", 1.0)
            self.ffn_multiplier = None if mult is None else float(mult)
            self.multiple_of = int(raw.get("block_multiple_of", 256))
            self.intermediate = lfm2_mlp_width(self.intermediate_size, self.auto_adjust, self.ffn_multiplier,
                                               self.multiple_of)
            self.dense_layers = self.layers
        if raw.get("layer_types") is not None:
            self.layer_types: List[str] = list(raw["layer_types"])
        else:
            idxs = raw.get("full_attn_idxs")
            idxs = set(range(self.layers) if idxs is None else idxs)
            self.layer_types = ["full_attention" if i in idxs else "conv" for i in range(self.layers)]
        if len(self.layer_types) != self.layers or set(self.layer_types) - {"full_attention", "conv"}:
            raise ValueError(f"layer_types {self.layer_types} do not describe {self.layers} layers")
        if self.heads % self.kv_heads or self.conv_l < 1:
            raise ValueError("query heads must be a multiple of KV heads, conv_L_cache at least 1")
        rp = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        rope_type = rp.get("rope_type", rp.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"rope_type {rope_type!r} is not supported (default)")
        self.theta = float(rp.get("rope_theta", raw.get("rope_theta", 1e6)))
        self.max_positions = int(raw.get("max_position_embeddings", 128000))

    def _moe_fields(self, raw: dict) -> None:
        """Lfm2MoeConfig's MoE fields and defaults: the first num_dense_layers layers dense, the rest MoE."""
        self.dense_layers = int(raw.get("num_dense_layers", 2))
        self.experts, self.top_k = int(raw.get("num_experts", 32)), int(raw.get("num_experts_per_tok", 4))
        self.moe_inter = int(raw.get("moe_intermediate_size", 1792))
        self.expert_bias = bool(raw.get("use_expert_bias", True))
        self.scaling = float(raw.get("routed_scaling_factor", 1.0))
        self.norm_topk = bool(raw.get("norm_topk_prob", True))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Lfm2RMSNorm: the plain weight times x * rsqrt(mean(x^2) + eps)."""
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class Lfm2Reference:
    """The model in float32 with its caches. Construct with from_dir()."""

    def __init__(self, cfg: Lfm2Config, tensors: Dict[str, np.ndarray]):
        self.cfg = c = cfg
        get = _Weights(tensors)
        self.embed = get("model.embed_tokens.weight", (c.vocab, c.hidden))
        self.layers = []
        for i, kind in enumerate(c.layer_types):
            lp = f"model.layers.{i}."
            layer = {"kind": kind, "ln1": get(lp + "operator_norm.weight", (c.hidden,)),
                     "ln2": get(lp + "ffn_norm.weight", (c.hidden,))}
            if i < c.dense_layers:
                layer["mlp"] = self._load_mlp(get, lp + "feed_forward.", c.intermediate)
            else:
                layer["moe"] = self._load_moe(get, lp + "feed_forward.")
            layer.update(self._load_attention(get, lp + "self_attn.") if kind == "full_attention"
                         else self._load_conv(get, lp + "conv."))
            self.layers.append(layer)
        self.norm = get("model.embedding_norm.weight", (c.hidden,))
        self.lm_head = self.embed if c.tied else get("lm_head.weight", (c.vocab, c.hidden))
        unread = get.unread()
        if unread:
            raise ValueError(f"tensors this reference does not read: {unread[:8]}{' ...' if len(unread) > 8 else ''}")
        self.inv_freq = hf_reference.default_inv_freq(c.head_dim, c.theta)
        self.long_context = False  # the interface of hf_reference.Reference; no long-context switch here
        self.reset()

    def _load_attention(self, get, a: str) -> dict:
        c = self.cfg
        q_out, kv_out = c.heads * c.head_dim, c.kv_heads * c.head_dim
        return {"wq": get(a + "q_proj.weight", (q_out, c.hidden)), "wk": get(a + "k_proj.weight", (kv_out, c.hidden)),
                "wv": get(a + "v_proj.weight", (kv_out, c.hidden)), "wo": get(a + "out_proj.weight", (c.hidden, q_out)),
                "q_norm": get(a + "q_layernorm.weight", (c.head_dim,)),
                "k_norm": get(a + "k_layernorm.weight", (c.head_dim,))}

    def _load_mlp(self, get, m: str, inter: int) -> tuple:
        """(w1 gate [I, H], w3 up [I, H], w2 down [H, I])."""
        h = self.cfg.hidden
        return get(m + "w1.weight", (inter, h)), get(m + "w3.weight", (inter, h)), get(m + "w2.weight", (h, inter))

    def _load_moe(self, get, m: str) -> dict:
        """Router gate.weight [E, H], expert_bias [E] (use_expert_bias), experts per expert experts.j.w1 / w3 / w2 (the
        checkpoints') or stacked experts.gate_up_proj [E, 2 Im, H] (rows gate | up) and experts.down_proj [E, H, Im]
        (transformers 5's in-memory form)."""
        c = self.cfg
        e, im, h = c.experts, c.moe_inter, c.hidden
        gate_up, down = stacked_experts(get, m, e, im, h, self._load_mlp)
        return {"router": get(m + "gate.weight", (e, h)), "gate_up": gate_up, "down": down,
                "bias": get(m + "expert_bias", (e,), c.expert_bias)}

    def _load_conv(self, get, a: str) -> dict:
        c, h, bias = self.cfg, self.cfg.hidden, self.cfg.conv_bias
        return {"w_in": get(a + "in_proj.weight", (3 * h, h)), "b_in": get(a + "in_proj.bias", (3 * h,), bias),
                "conv": get(a + "conv.weight", (h, 1, c.conv_l))[:, 0, :],  # [channels, L]
                "b_conv": get(a + "conv.bias", (h,), bias),
                "w_out": get(a + "out_proj.weight", (h, h)), "b_out": get(a + "out_proj.bias", (h,), bias)}

    @classmethod
    def from_dir(cls, model_dir: str) -> "Lfm2Reference":
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = Lfm2Config(json.load(f))
        return cls(cfg, hf_reference.load_hf_tensors(model_dir))

    def reset(self) -> None:
        """Empty caches: K/V for the attention layers, a window of L-1 zero inputs for the conv ones."""
        c = self.cfg
        self.cache_k: List[Optional[torch.Tensor]] = [None] * c.layers
        self.cache_v: List[Optional[torch.Tensor]] = [None] * c.layers
        self.conv_state = [torch.zeros(c.conv_l - 1, c.hidden) for _ in range(c.layers)]
        self.pos = 0

    @staticmethod
    def _linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
        y = x @ w.t()
        return y if b is None else y + b

    def _attention(self, i: int, L: dict, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Lfm2Attention: q/k per-head norms, then RoPE over the whole head, causal GQA softmax, out_proj."""
        c, n = self.cfg, x.shape[0]
        q = rms_norm(self._linear(x, L["wq"]).view(n, c.heads, c.head_dim), L["q_norm"], c.eps)
        k = rms_norm(self._linear(x, L["wk"]).view(n, c.kv_heads, c.head_dim), L["k_norm"], c.eps)
        v = self._linear(x, L["wv"]).view(n, c.kv_heads, c.head_dim)
        q = q * cos + hf_reference.rotate_half(q) * sin
        k = k * cos + hf_reference.rotate_half(k) * sin
        self.cache_k[i] = k if self.cache_k[i] is None else torch.cat((self.cache_k[i], k))
        self.cache_v[i] = v if self.cache_v[i] is None else torch.cat((self.cache_v[i], v))
        rep = c.heads // c.kv_heads  # query head h reads KV head h // rep (repeat_kv)
        keys, values = self.cache_k[i].repeat_interleave(rep, dim=1), self.cache_v[i].repeat_interleave(rep, dim=1)
        total = keys.shape[0]
        scores = torch.einsum("qhd,khd->hqk", q, keys) * c.head_dim ** -0.5
        causal = torch.arange(total)[None, :] <= torch.arange(total - n, total)[:, None]  # [n, total]
        probs = torch.softmax(scores.masked_fill(~causal[None], float("-inf")), dim=-1, dtype=torch.float32)
        attn = torch.einsum("hqk,khd->qhd", probs, values).reshape(n, c.heads * c.head_dim)
        return self._linear(attn, L["wo"])

    def _short_conv(self, i: int, L: dict, x: torch.Tensor) -> torch.Tensor:
        """Lfm2ShortConv: in_proj -> B, C, x; v = B * x; causal depthwise conv of v (no activation), the inputs
        before this call from the carried window (zeros at the start); out_proj(C * conv)."""
        c, n = self.cfg, x.shape[0]
        b, cg, xs = self._linear(x, L["w_in"], L["b_in"]).split(c.hidden, dim=-1)
        padded = torch.cat((self.conv_state[i], b * xs))  # [L-1+n, H]
        self.conv_state[i] = padded[padded.shape[0] - (c.conv_l - 1):].clone()
        windows = padded.unfold(0, c.conv_l, 1)  # [n, H, L]: row t holds inputs t .. t+L-1 of padded
        assert windows.shape[0] == n
        conv = (windows * L["conv"]).sum(-1)
        if L["b_conv"] is not None:
            conv = conv + L["b_conv"]
        return self._linear(cg * conv, L["w_out"], L["b_out"])

    def _moe(self, M: dict, x: torch.Tensor) -> torch.Tensor:
        """Lfm2MoeSparseMoeBlock: sigmoid scores; the top-k chosen by score + expert_bias (when used), weighted by
        their scores, divided by (sum + 1e-6) when norm_topk_prob, times routed_scaling_factor; experts summed in
        expert order (index_add)."""
        c = self.cfg
        scores = torch.sigmoid(x @ M["router"].t())
        chosen = torch.topk(scores if M["bias"] is None else scores + M["bias"], c.top_k, dim=-1)[1]
        weights = scores.gather(1, chosen)
        if c.norm_topk:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-6)
        weights = weights * c.scaling
        out = torch.zeros_like(x)
        for e in range(c.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            gate, up = M["gate_up"][e].split(c.moe_inter)
            out.index_add_(0, rows, _mlp(x[rows], gate, up, M["down"][e]) * weights[rows, slot, None])
        return out

    @torch.no_grad()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Appends ids at the current position; returns their logits [len(ids), vocab] (float32)."""
        c, n = self.cfg, len(ids)
        ids_t, cos, sin = ids_and_rope(ids, c.vocab, self.pos, self.inv_freq)
        h = self.embed[ids_t]
        for i, L in enumerate(self.layers):
            x = rms_norm(h, L["ln1"], c.eps)
            h = h + (self._attention(i, L, x, cos, sin) if L["kind"] == "full_attention"
                     else self._short_conv(i, L, x))
            x = rms_norm(h, L["ln2"], c.eps)
            h = h + (self._moe(L["moe"], x) if "moe" in L else _mlp(x, *L["mlp"]))
        self.pos += n
        return rms_norm(h, self.norm, c.eps) @ self.lm_head.t()

    # Same driving code as the dense oracle: reset, forward the prompt, then argmax one token at a time.
    prompt_logits = hf_reference.Reference.prompt_logits
    greedy = hf_reference.Reference.greedy


if __name__ == "__main__":
    raise SystemExit(hf_reference.main())
