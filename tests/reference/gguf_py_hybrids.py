"""gguf_py_writer.py's hybrid families (recurrent + attention layers), each in llama.cpp's layout as its converter
(convert_hf_to_gguf.py / conversion/*.py of llama.cpp as vendored by llama-cpp-python 0.3.36) writes it:
  qwen3_5 / qwen3_5_text -> qwen35, qwen3_5_moe / qwen3_5_moe_text -> qwen35moe (Qwen3_5TextModel /
      Qwen3_5MoeTextModel), qwen3_next -> qwen3next (Qwen3NextModel): Qwen35 below;
  lfm2 -> lfm2 (LFM2Model), lfm2_moe -> lfm2moe (LFM2MoeModel): Lfm2 below;
  granitemoehybrid -> granitehybrid, nemotron_h -> nemotron_h: gguf_py_mamba2.py.
Each family is a Family: its GGUF arch, the common keys' values where they differ from gguf_py_writer's defaults
(common()), its own keys (add_keys()) and its tensors under llama.cpp's names (tensors(); values are loaders, functions
returning the numpy array, as gguf_py_writer's). Configs are refused (SystemExit) where llama.cpp would not load the
file or would compute something else.
"""

from __future__ import annotations

import gguf
import numpy as np


def permute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf LlamaModel.permute: HF's half-split rows -> Meta's interleaved pairs."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def converted(out: dict, name: str, load, fn) -> None:
    """out[name] = a loader of fn(the f32 array), contiguous."""
    out[name] = lambda: np.ascontiguousarray(fn(load().astype(np.float32)))


class Family:
    """One hybrid family's GGUF (see the module's docstring)."""

    arch = ""

    def __init__(self, cfg: dict):
        self.cfg = cfg

    def common(self) -> dict:
        """Overrides of gguf_py_writer's common keys: context_length, block_count, feed_forward_length,
        head_count_kv, head_dim, rope_dims, rms_eps, rope_theta (a value of None: the key is not written)."""
        return {}

    def add_keys(self, w: gguf.GGUFWriter) -> None:
        pass

    def tensors(self, tensors: dict) -> dict:
        raise NotImplementedError


# Qwen3.5's / Qwen3-Next's layers in llama.cpp's names (their Gated DeltaNet layers' are in QWEN35_LINEAR_NAMES).
QWEN35_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
                "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
QWEN35_LINEAR_NAMES = {"in_proj_qkv.weight": "attn_qkv.weight", "in_proj_z.weight": "attn_gate.weight",
                       "in_proj_b.weight": "ssm_beta.weight", "in_proj_a.weight": "ssm_alpha.weight",
                       "conv1d.weight": "ssm_conv1d.weight", "A_log": "ssm_a", "dt_bias": "ssm_dt.bias",
                       "norm.weight": "ssm_norm.weight", "out_proj.weight": "ssm_out.weight",
                       "in_proj_ba.weight": "ssm_ba.weight"}  # the last Qwen3-Next's (in_proj_qkvz: split)
# Only a text model is written: the vision tower of Qwen3_5ForConditionalGeneration is left out, as llama.cpp's text
# converter leaves it out (it goes into an mmproj file); the MTP layers are left out too (llama.cpp's converter
# appends them as extra blocks with nextn_predict_layers, which this writer does not: its --no-mtp).
QWEN35_SKIPPED = ("model.visual.", "mtp.", "model.mtp.")
# Qwen3.5-MoE's / Qwen3-Next's feed-forward block in llama.cpp's names (gguf-py's tensor_mapping, as Qwen2MoeModel
# maps them): the router, the shared expert and its gate (the routed experts are stacked: qwen35_moe_tensors).
QWEN35_MOE_NAMES = {"mlp.gate.weight": "ffn_gate_inp.weight",
                    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
                    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
                    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
                    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight"}
QWEN35_EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


def tiled_v_heads(t: np.ndarray, axis: int, k_heads: int, v_heads: int, head_dim: int) -> np.ndarray:
    """llama.cpp's _LinearAttentionVReorderBase._reorder_v_heads: the value heads along `axis` from HF's order,
    grouped by key head [k0v0, k0v1, ..., k1v0, k1v1, ...], to the tiled order ggml broadcasts in
    [k0v0, k1v0, ..., k0v1, k1v1, ...]; each head head_dim wide."""
    t = np.moveaxis(t, axis, 0)
    rest = t.shape[1:]
    t = t.reshape(k_heads, v_heads // k_heads, head_dim, *rest).swapaxes(0, 1).reshape(v_heads * head_dim, *rest)
    return np.ascontiguousarray(np.moveaxis(t, 0, axis))


def split_qkvz(a: np.ndarray, hk: int, dk: int, vz: int) -> tuple:
    """Qwen3NextModel.modify_tensors' in_proj_qkvz: rows grouped per key head [q (dk) | k (dk) | v (vz) | z (vz)]
    (vz = the group's value heads times their width) -> (attn_qkv rows [all q | all k | all v], attn_gate rows [all z]);
    the value heads stay in HF's grouped order."""
    g = a.reshape(hk, 2 * dk + 2 * vz, a.shape[-1])
    q, k, v, z = (g[:, s:e].reshape(-1, a.shape[-1]) for s, e in
                  ((0, dk), (dk, 2 * dk), (2 * dk, 2 * dk + vz), (2 * dk + vz, 2 * dk + 2 * vz)))
    return np.concatenate([q, k, v]), z


def qwen35_moe_tensors(blk: str, rest: str, load, out: dict, stacks: dict) -> bool:
    """Qwen3.5-MoE's / Qwen3-Next's feed-forward tensors of one layer (blk "blk.N.", rest the HF name after
    model.layers.N.), as llama.cpp's Qwen2MoeModel.modify_tensors (which both converters inherit): per-expert
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


class Qwen35(Family):
    """Qwen3.5 (qwen35), Qwen3.5-MoE (qwen35moe), Qwen3-Next (qwen3next)."""

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        mt = cfg["model_type"]
        self.next = mt == "qwen3_next"
        self.arch = "qwen3next" if self.next else "qwen35moe" if mt.startswith("qwen3_5_moe") else "qwen35"
        self.hk, self.hv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
        self.dk, self.dv = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"])
        self.experts = int(cfg.get("num_experts") or 0)
        if self.next:  # what llama.cpp's qwen3next graph cannot represent
            layers, step = int(cfg["num_hidden_layers"]), int(cfg.get("decoder_sparse_step", 1))
            if self.experts == 0 or cfg.get("mlp_only_layers") or any((i + 1) % step for i in range(layers)):
                raise SystemExit("qwen3next: llama.cpp loads MoE in every layer (no mlp_only_layers / sparse step)")
            if not cfg.get("norm_topk_prob", True):
                raise SystemExit("qwen3next: llama.cpp always renormalises the top-k weights (norm_topk_prob)")
            if self.dk != self.dv:
                raise SystemExit("qwen3next: llama.cpp takes the value head width from ssm.state_size (dk == dv)")

    def add_keys(self, w: gguf.GGUFWriter) -> None:
        """As llama.cpp's Qwen3NextModel / _Qwen35MRopeMixin set_gguf_parameters: the delta rule's shape (ssm.*), which
        layers are recurrent (attention.recurrent_layers, from layer_types) and the interval; Qwen3.5's mRoPE sections
        (rope_parameters.mrope_section padded to 4, else llama.cpp's default [11, 11, 10, 0]; Qwen3-Next has none);
        with experts, as Qwen2MoeModel.set_gguf_parameters (the counts from TextModel's)."""
        cfg, arch = self.cfg, self.arch
        w.add_ssm_conv_kernel(int(cfg["linear_conv_kernel_dim"]))
        w.add_ssm_state_size(self.dk)
        w.add_ssm_group_count(self.hk)
        w.add_ssm_time_step_rank(self.hv)
        w.add_ssm_inner_size(self.dv * self.hv)
        if cfg.get("layer_types") is not None:
            w.add_array(f"{arch}.attention.recurrent_layers", [t == "linear_attention" for t in cfg["layer_types"]])
        w.add_full_attention_interval(int(cfg.get("full_attention_interval", 4)))
        if not self.next:
            sections = list((cfg.get("rope_parameters") or {}).get("mrope_section") or [11, 11, 10, 0])
            w.add_rope_dimension_sections((sections + [0] * 4)[:4])
        if self.experts:
            w.add_expert_count(self.experts)
            w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
            w.add_expert_feed_forward_length(int(cfg["moe_intermediate_size"]))
            if cfg.get("shared_expert_intermediate_size") is not None:
                w.add_expert_shared_feed_forward_length(int(cfg["shared_expert_intermediate_size"]))

    def _linear(self, out: dict, blk: str, key: str, load) -> None:
        """One Gated DeltaNet tensor (key: its name after linear_attn.), as Qwen3NextModel.modify_tensors: A_log stored
        as ssm_a = -exp(A_log), dt_bias as ssm_dt.bias, conv1d [channels, 1, kernel] squeezed to [channels, kernel],
        Qwen3-Next's in_proj_qkvz split (split_qkvz) and in_proj_ba kept as it is (ssm_ba, rows grouped per key head
        [b | a]); Qwen3.5's value heads reordered from grouped to tiled (_LinearAttentionVReorderBase: in_proj_qkv's V
        rows, in_proj_z's rows, in_proj_a/b's rows, A_log, dt_bias, conv1d's V channels, out_proj's columns; only when
        there are more value heads than key heads)."""
        hk, hv, dv, qk = self.hk, self.hv, self.dv, 2 * self.hk * self.dk
        reorder = hk != hv and not self.next

        def v_rows(a, axis=0, width=dv):
            return tiled_v_heads(a, axis, hk, hv, width) if reorder else a

        name = blk + QWEN35_LINEAR_NAMES.get(key, "")
        if key == "in_proj_qkvz.weight":
            vz = hv // hk * dv
            converted(out, blk + "attn_qkv.weight", load, lambda a: split_qkvz(a, hk, self.dk, vz)[0])
            converted(out, blk + "attn_gate.weight", load, lambda a: split_qkvz(a, hk, self.dk, vz)[1])
        elif key == "in_proj_qkv.weight":
            converted(out, name, load, lambda a: np.concatenate([a[:qk], v_rows(a[qk:])]))
        elif key == "in_proj_z.weight":
            converted(out, name, load, v_rows)
        elif key in ("in_proj_a.weight", "in_proj_b.weight", "dt_bias"):
            converted(out, name, load, lambda a: v_rows(a, 0, 1))
        elif key == "A_log":
            converted(out, name, load, lambda a: -np.exp(v_rows(a, 0, 1)))
        elif key == "conv1d.weight":
            converted(out, name, load, lambda a: (lambda c: np.concatenate([c[:qk], v_rows(c[qk:])]))(
                a.reshape(a.shape[0], a.shape[-1])))
        elif key == "out_proj.weight":
            converted(out, name, load, lambda a: v_rows(a, 1))
        elif key in ("norm.weight", "in_proj_ba.weight"):  # the delta rule's gated norm, stored as it is
            out[name] = load
        else:
            raise SystemExit(f"unexpected {self.arch} tensor {blk}linear_attn.{key}")

    def tensors(self, tensors: dict) -> dict:
        """model.language_model.* (or model.*) to GGUF names; every RMSNorm weight but the delta rule's
        (linear_attn.norm) stored as 1 + w (the attention's q/k norms, the layer norms, the final norm). q_proj stays as
        it is: attn_q holds each head's query rows then its gate rows (2x rows), as llama.cpp loads it. The Gated
        DeltaNet tensors as _linear writes them, the MoE block as qwen35_moe_tensors."""
        out, stacks = {}, {}
        for name, load in tensors.items():
            if name.startswith(QWEN35_SKIPPED):
                continue
            if name.startswith("model.language_model."):
                name = "model." + name[len("model.language_model."):]
            elif not name.startswith(("model.", "lm_head.")):
                raise SystemExit(f"unexpected {self.arch} tensor {name}")
            top = {"model.embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight"}
            if name in top:
                out[top[name]] = load
                continue
            if name == "model.norm.weight":
                converted(out, "output_norm.weight", load, lambda a: a + 1)
                continue
            parts = name.split(".")  # model.layers.N.<module...>.weight
            blk, rest = f"blk.{parts[2]}.", ".".join(parts[3:])
            if self.experts and qwen35_moe_tensors(blk, rest, load, out, stacks):
                continue
            if rest.startswith("linear_attn."):
                self._linear(out, blk, rest[len("linear_attn."):], load)
            elif rest.endswith("norm.weight"):
                converted(out, blk + QWEN35_NAMES[rest[:-len(".weight")]] + ".weight", load, lambda a: a + 1)
            else:
                out[blk + QWEN35_NAMES[rest[:-len(".weight")]] + ".weight"] = load
        for stacked, by_expert in stacks.items():
            if sorted(by_expert) != list(range(self.experts)):
                raise SystemExit(f"{stacked}: experts {sorted(by_expert)} of {self.experts}")
            out[stacked] = lambda b=by_expert: np.stack([b[j]() for j in sorted(b)])
        return out


# LFM2's tensors in llama.cpp's names (LFM2Model: gguf-py's tensor_mapping for MODEL_ARCH.LFM2). The final norm
# model.embedding_norm becomes token_embd_norm (llama.cpp loads it as the output norm, LLM_TENSOR_OUTPUT_NORM_LFM2).
# LFM2-MoE's (LFM2MoeModel) adds the router and the expert bias (its experts are stacked: Lfm2._experts).
LFM2_NAMES = {"operator_norm": "attn_norm", "ffn_norm": "ffn_norm", "feed_forward.w1": "ffn_gate",
              "feed_forward.w3": "ffn_up", "feed_forward.w2": "ffn_down", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.out_proj": "attn_output",
              "self_attn.q_layernorm": "attn_q_norm", "self_attn.k_layernorm": "attn_k_norm",
              "conv.conv": "shortconv.conv", "conv.in_proj": "shortconv.in_proj", "conv.out_proj": "shortconv.out_proj",
              "feed_forward.gate": "ffn_gate_inp"}
LFM2_EXPERT_NAMES = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}


def lfm2_fields(cfg: dict) -> dict:
    """What llama.cpp's converter reads of an LFM2 config after transformers' Lfm2Config has normalised it (the
    converter loads config.json through AutoConfig): the legacy block_ff_dim / tie_embedding keys win over
    intermediate_size / tie_word_embeddings, layer_types falls back to full_attn_idxs (else every layer attention),
    rope_theta to 1e6. The FFN width as LFM2Model._add_feed_forward_length: int(2 I / 3), times the multiplier when
    not null, rounded up to block_multiple_of (which transformers skips when the multiplier is null); LFM2-MoE's
    (LFM2MoeModel, TextModel's) is intermediate_size as it is."""
    layers = int(cfg["num_hidden_layers"])
    types = cfg.get("layer_types")
    if types is None:
        idxs = cfg.get("full_attn_idxs")
        idxs = set(range(layers) if idxs is None else idxs)
        types = ["full_attention" if i in idxs else "conv" for i in range(layers)]
    ff = int(cfg.get("block_ff_dim", cfg.get("intermediate_size", 12288)))
    if cfg["model_type"] == "lfm2" and cfg.get("block_auto_adjust_ff_dim", True):
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


class Lfm2(Family):
    """LFM2 (lfm2) and LFM2-MoE (lfm2moe)."""

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.moe = cfg["model_type"] == "lfm2_moe"
        self.arch = "lfm2moe" if self.moe else "lfm2"
        self.f = lfm2_fields(cfg)
        if self.moe and not (cfg.get("use_expert_bias", True) and cfg.get("norm_topk_prob", True)
                             and float(cfg.get("routed_scaling_factor", 1.0)) == 1.0):
            raise SystemExit("lfm2moe: llama.cpp needs the expert bias, always renormalises the top-k weights and "
                             "reads no routed scaling (use_expert_bias, norm_topk_prob true, routed_scaling_factor 1)")

    def common(self) -> dict:
        """The FFN width (lfm2_fields), head_count_kv per layer with 0 marking the conv layers (as the converters),
        norm_eps, the theta."""
        f = self.f
        return {"feed_forward_length": f["ff"], "head_count_kv": [f["kv"] if t != "conv" else 0 for t in
                                                                   f["layer_types"]],
                "rms_eps": f["eps"], "rope_theta": f["theta"]}

    def add_keys(self, w: gguf.GGUFWriter) -> None:
        """As LFM2Model.set_gguf_parameters: the vocabulary size and the conv kernel length; LFM2MoeModel's adds the
        experts' counts (TextModel's), their width, the leading dense layers and the sigmoid gating."""
        cfg = self.cfg
        w.add_vocab_size(int(cfg["vocab_size"]))
        w.add_shortconv_l_cache(self.f["l_cache"])
        if self.moe:
            w.add_expert_count(int(cfg["num_experts"]))
            w.add_expert_used_count(int(cfg["num_experts_per_tok"]))
            w.add_expert_feed_forward_length(int(cfg["moe_intermediate_size"]))
            w.add_leading_dense_block_count(int(cfg["num_dense_layers"]))
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)

    def tensors(self, tensors: dict) -> dict:
        """As LFM2Model.modify_tensors / LFM2MoeModel's: HF names to llama.cpp's (LFM2_NAMES), conv.conv.weight
        [H, 1, L] squeezed to [H, L]; a tied checkpoint's lm_head.weight left out (llama.cpp reuses token_embd). MoE:
        feed_forward.expert_bias -> exp_probs_b.bias, the per-expert w1 / w3 / w2 stacked into ffn_gate_exps /
        ffn_up_exps / ffn_down_exps [experts, rows, cols] (transformers 5's stacked experts.gate_up_proj split in
        halves, gate first, experts.down_proj kept). Conv biases (conv_bias true) are refused: llama.cpp's graph has
        none."""
        out, stacks = {}, {}
        for name, load in tensors.items():
            if name == "model.embed_tokens.weight":
                out["token_embd.weight"] = load
            elif name == "model.embedding_norm.weight":
                out["token_embd_norm.weight"] = load
            elif name == "lm_head.weight":
                if not self.f["tied"]:
                    out["output.weight"] = load
            elif name.endswith(".bias"):
                raise SystemExit(f"LFM2 tensor {name}: llama.cpp's lfm2 has no biases (conv_bias must be false)")
            else:
                parts = name.split(".")  # model.layers.N.<module...>
                if parts[:2] != ["model", "layers"]:
                    raise SystemExit(f"unexpected LFM2 tensor {name}")
                blk, rest = f"blk.{parts[2]}.", ".".join(parts[3:])
                if not self._experts(blk, rest, load, out, stacks):
                    squeeze = rest == "conv.conv.weight"  # the depthwise kernel [H, 1, L] -> [H, L]
                    converted(out, f"{blk}{LFM2_NAMES[rest[:-len('.weight')]]}.weight", load,
                              (lambda a: a.reshape(a.shape[0], -1)) if squeeze else (lambda a: a))
        for stacked, by_expert in stacks.items():
            if sorted(by_expert) != list(range(int(self.cfg["num_experts"]))):
                raise SystemExit(f"{stacked}: experts {sorted(by_expert)}")
            out[stacked] = lambda b=by_expert: np.stack([b[j]() for j in sorted(b)])
        return out

    @staticmethod
    def _experts(blk: str, rest: str, load, out: dict, stacks: dict) -> bool:
        """LFM2-MoE's expert bias and experts (see tensors); False for any other tensor."""
        if rest == "feed_forward.expert_bias":
            out[blk + "exp_probs_b.bias"] = load
        elif rest.startswith("feed_forward.experts.") and rest.count(".") == 4:  # feed_forward.experts.J.wK.weight
            _, _, j, proj, _ = rest.split(".")
            stacks.setdefault(blk + LFM2_EXPERT_NAMES[proj] + ".weight", {})[int(j)] = load
        elif rest == "feed_forward.experts.gate_up_proj":
            converted(out, blk + "ffn_gate_exps.weight", load, lambda a: a[:, :a.shape[1] // 2])
            converted(out, blk + "ffn_up_exps.weight", load, lambda a: a[:, a.shape[1] // 2:])
        elif rest == "feed_forward.experts.down_proj":
            out[blk + "ffn_down_exps.weight"] = load
        else:
            return False
        return True


FAMILIES = {"qwen3_5": Qwen35, "qwen3_5_text": Qwen35, "qwen3_5_moe": Qwen35, "qwen3_5_moe_text": Qwen35,
            "qwen3_next": Qwen35, "lfm2": Lfm2, "lfm2_moe": Lfm2}
