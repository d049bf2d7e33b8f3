"""gguf_py_writer.py's Mamba-2 hybrids (Families, see gguf_py_hybrids.py): Granite 4.0-H (granitemoehybrid ->
granitehybrid, as llama.cpp's GraniteHybridModel converter writes it) and Nemotron-H without MoE layers (nemotron_h ->
nemotron_h, as its NemotronHModel converter writes a checkpoint whose pattern has only M, * and - layers).
"""

from __future__ import annotations

import gguf
import numpy as np

from gguf_py_hybrids import Family, converted, permute_rows

# The Mamba-2 mixer's tensors in llama.cpp's names (gguf-py's tensor_mapping), after the mixer's prefix.
MAMBA2_NAMES = {"in_proj.weight": "ssm_in.weight", "conv1d.weight": "ssm_conv1d.weight",
                "conv1d.bias": "ssm_conv1d.bias", "dt_bias": "ssm_dt.bias", "A_log": "ssm_a", "D": "ssm_d",
                "norm.weight": "ssm_norm.weight", "out_proj.weight": "ssm_out.weight"}


def mamba2_tensor(out: dict, blk: str, key: str, load, groups: int) -> None:
    """One Mamba-2 mixer tensor (key: its name after the mixer's prefix), as Mamba2Model.modify_tensors: conv1d
    [ch, 1, K] squeezed to [ch, K]; A_log stored as ssm_a = -exp(A_log) [heads, 1], D as [heads, 1], the gated norm's
    weight as [groups, d_inner / groups]; dt_bias as ssm_dt.bias."""
    fn = {"conv1d.weight": lambda a: a.reshape(a.shape[0], a.shape[-1]),
          "A_log": lambda a: -np.exp(a).reshape(-1, 1), "D": lambda a: a.reshape(-1, 1),
          "norm.weight": lambda a: a.reshape(groups, -1)}.get(key, lambda a: a)
    converted(out, blk + MAMBA2_NAMES[key], load, fn)


def attention_tensor(out: dict, blk: str, module: str, kind: str, load, heads: int, kv: int) -> None:
    """q / k / v / o (module: q_proj ...; kind: weight or bias) as LlamaModel.modify_tensors with undo_permute (which
    both converters set): q rows permuted over the heads, k rows over the KV heads (NoPE makes that immaterial)."""
    name = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output"}[module]
    n = heads if module == "q_proj" else kv
    converted(out, f"{blk}{name}.{kind}", load,
              (lambda a: permute_rows(a, n)) if module in ("q_proj", "k_proj") else (lambda a: a))


def check_mamba_vocab(arch: str, cfg: dict) -> None:
    """The converters pad the token list to a multiple of 8 while token_embd keeps the checkpoint's rows, and
    llama.cpp would not load such a file: refused."""
    if int(cfg["vocab_size"]) % 8:
        raise SystemExit(f"{arch}: vocab_size {cfg['vocab_size']} is not a multiple of 8")


class GraniteHybrid(Family):
    """Granite 4.0-H (granitehybrid)."""

    arch = "granitehybrid"

    def __init__(self, cfg: dict):
        """What GraniteHybridModel reads: the attention layers (its converter counts only the legacy name "attention";
        transformers 5 writes "full_attention", taken here too), the Mamba-2 shape (d_inner = mamba_expand * hidden,
        heads, groups, state, kernel), whether there are routed experts. Refused: in_proj / out_proj biases (llama.cpp
        loads none), a vocabulary that is not a multiple of 8."""
        super().__init__(cfg)
        layers = int(cfg["num_hidden_layers"])
        types = cfg.get("layer_types") or cfg.get("layers_block_type") or ["mamba"] * layers
        self.attn = [t in ("attention", "full_attention") for t in types]
        check_mamba_vocab(self.arch, cfg)
        if cfg.get("mamba_proj_bias"):
            raise SystemExit("granitehybrid: llama.cpp loads no ssm_in / ssm_out biases "
                             "(mamba_proj_bias must be false)")
        self.d_inner = int(cfg.get("mamba_expand", 2)) * int(cfg["hidden_size"])
        self.heads, self.groups = int(cfg.get("mamba_n_heads", 128)), int(cfg.get("mamba_n_groups", 1))
        self.d_state, self.d_conv = int(cfg.get("mamba_d_state", 256)), int(cfg.get("mamba_d_conv", 4))
        self.experts = int(cfg.get("num_local_experts") or 0)

    def common(self) -> dict:
        """NoPE, and its converter then writes 2**20 as the context length; head_count_kv per layer, 0 marking the
        Mamba layers."""
        kv = int(self.cfg.get("num_key_value_heads") or self.cfg["num_attention_heads"])
        return {"context_length": 2 ** 20, "head_count_kv": [kv if a else 0 for a in self.attn]}

    def add_keys(self, w: gguf.GGUFWriter) -> None:
        """As GraniteHybridModel.set_gguf_parameters beyond the common keys: the multipliers as *_scale keys (only
        those the config states and that are non-zero), the experts' counts (always) and the shared width, the ssm.*
        shape (time_step_rank = the SSM heads), rope.scaling.finetuned false (llama.cpp's switch for RoPE: off for every
        granitemoehybrid with Mamba layers, whatever position_embedding_type says), the vocabulary size."""
        cfg = self.cfg
        for key, add in (("attention_multiplier", w.add_attention_scale),
                         ("embedding_multiplier", w.add_embedding_scale),
                         ("residual_multiplier", w.add_residual_scale), ("logits_scaling", w.add_logit_scale)):
            if cfg.get(key):
                add(float(cfg[key]))
        w.add_expert_count(self.experts)
        w.add_expert_used_count(int(cfg.get("num_experts_per_tok") or 0))
        if cfg.get("shared_intermediate_size"):
            w.add_expert_shared_feed_forward_length(int(cfg["shared_intermediate_size"]))
        add_ssm_keys(w, self.d_conv, self.d_state, self.groups, self.d_inner, self.heads)
        w.add_rope_scaling_finetuned(False)
        w.add_vocab_size(int(cfg["vocab_size"]))

    def tensors(self, tensors: dict) -> dict:
        """As GraniteHybridModel.modify_tensors (Mamba2Model's for the Mamba layers: mamba2_tensor, GraniteMoeModel's /
        LlamaModel's for the rest: attention_tensor): block_sparse_moe.input_linear [E, 2 I, H] split by rows into
        ffn_gate_exps | ffn_up_exps, shared_mlp.input_linear [2 Is, H] into ffn_gate_shexp | ffn_up_shexp (ffn_gate |
        ffn_up with no routed experts; output_linear likewise ffn_down_shexp or ffn_down), the router into
        ffn_gate_inp, output_linear into ffn_down_exps; transformers 5's in-memory spellings (experts.gate_up_proj /
        down_proj, router.weight) are read too."""
        cfg, shexp, out = self.cfg, "_shexp" if self.experts else "", {}
        heads, kv = int(cfg["num_attention_heads"]), int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])

        def halves(blk, load, first, second):
            converted(out, blk + first, load, lambda a: a[..., :a.shape[-2] // 2, :])
            converted(out, blk + second, load, lambda a: a[..., a.shape[-2] // 2:, :])

        top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
               "lm_head.weight": "output.weight"}
        names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "block_sparse_moe.router.layer.weight": "ffn_gate_inp.weight",
                 "block_sparse_moe.output_linear.weight": "ffn_down_exps.weight",
                 "shared_mlp.output_linear.weight": f"ffn_down{shexp}.weight"}
        for name, load in tensors.items():
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
            elif rest.startswith("self_attn."):
                module, kind = rest[len("self_attn."):].rsplit(".", 1)
                attention_tensor(out, blk, module, kind, load, heads, kv)
            elif rest.startswith("mamba."):
                mamba2_tensor(out, blk, rest[len("mamba."):], load, self.groups)
            else:
                out[blk + names[rest]] = load
        return out


def add_ssm_keys(w: gguf.GGUFWriter, d_conv: int, d_state: int, groups: int, d_inner: int, heads: int) -> None:
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_state_size(d_state)
    w.add_ssm_group_count(groups)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_time_step_rank(heads)


# Nemotron-H's hybrid_override_pattern characters and the legacy layer type names, as transformers reads them.
NEMOTRON_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
NEMOTRON_LEGACY = {"mamba": "linear_attention", "attention": "full_attention"}
NEMOTRON_MLP_NAMES = {"up_proj": "ffn_up", "down_proj": "ffn_down"}


class NemotronH(Family):
    """Nemotron-H without MoE layers (nemotron_h)."""

    arch = "nemotron_h"

    def __init__(self, cfg: dict):
        """The layer kinds from layers_block_type (layer_types), else hybrid_override_pattern; the block count is their
        number (NemotronHModel sets num_hidden_layers so). Refused: MoE layers (llama.cpp's nemotron_h_moe, not written
        here), in_proj / out_proj biases (use_bias; llama.cpp loads none), a vocabulary not a multiple of 8."""
        super().__init__(cfg)
        types = cfg.get("layers_block_type") or cfg.get("layer_types")
        if types is None:
            types = [NEMOTRON_PATTERN[ch] for ch in cfg["hybrid_override_pattern"]]
        self.types = [NEMOTRON_LEGACY.get(t, t) for t in types]
        if "moe" in self.types:
            raise SystemExit("nemotron_h: MoE layers make llama.cpp's nemotron_h_moe, which this writer does not write")
        if set(self.types) - {"linear_attention", "full_attention", "mlp"}:
            raise SystemExit(f"nemotron_h: unknown layer types {types}")
        if cfg.get("use_bias"):
            raise SystemExit("nemotron_h: llama.cpp loads no ssm_in / ssm_out biases (use_bias must be false)")
        check_mamba_vocab(self.arch, cfg)
        self.heads, self.head_dim = int(cfg.get("mamba_num_heads", 128)), int(cfg.get("mamba_head_dim", 64))
        self.groups = int(cfg.get("n_groups", cfg.get("mamba_n_groups", 8)))
        self.attn_heads = int(cfg.get("num_attention_heads", 32))
        self.kv = int(cfg.get("num_key_value_heads") or self.attn_heads)

    def common(self) -> dict:
        """The converter's: context 2**20 (no RoPE), block count = the layers' number, feed_forward_length per layer
        (intermediate_size on the MLP layers, 0 elsewhere) and head_count_kv per layer (the KV heads on the attention
        layers, 0 elsewhere; llama.cpp takes a layer with both 0 for a Mamba layer), head_dim (or attention_head_dim)
        as key / value length, rope dimension count hidden / heads (LlamaModel's, GraniteModel having dropped head_dim);
        no layer_norm_rms_epsilon and no rope theta (llama.cpp then uses layer_norm_epsilon for the RMS norms)."""
        cfg = self.cfg
        ff = int(cfg.get("intermediate_size", 21504))
        return {"context_length": 2 ** 20, "block_count": len(self.types),
                "feed_forward_length": [ff if t == "mlp" else 0 for t in self.types],
                "head_count_kv": [self.kv if t == "full_attention" else 0 for t in self.types],
                "head_dim": int(cfg.get("head_dim") or cfg.get("attention_head_dim") or 128),
                "rope_dims": int(cfg["hidden_size"]) // self.attn_heads, "rms_eps": None, "rope_theta": None}

    def add_keys(self, w: gguf.GGUFWriter) -> None:
        """layer_norm_epsilon (TextModel's), the vocabulary size (LlamaModel's), the ssm.* shape (d_inner =
        mamba_num_heads * mamba_head_dim, time_step_rank = the SSM heads), rope.scaling.finetuned false
        (GraniteHybridModel's)."""
        cfg = self.cfg
        w.add_layer_norm_eps(float(cfg.get("layer_norm_epsilon", 1e-5)))
        w.add_vocab_size(int(cfg["vocab_size"]))
        add_ssm_keys(w, int(cfg.get("conv_kernel", cfg.get("mamba_d_conv", 4))), int(cfg.get("ssm_state_size", 128)),
                     self.groups, self.heads * self.head_dim, self.heads)
        w.add_rope_scaling_finetuned(False)

    def tensors(self, tensors: dict) -> dict:
        """backbone.* (the checkpoints') or model.* (transformers 5's in-memory names): embeddings -> token_embd,
        norm_f -> output_norm, lm_head -> output; per layer norm -> attn_norm and the mixer's tensors by the layer's
        kind: Mamba-2 (mamba2_tensor), attention (attention_tensor), MLP up_proj / down_proj (weights and mlp_bias
        biases) -> ffn_up / ffn_down. mtp.* is left out."""
        out = {}
        top = {"embeddings.weight": "token_embd.weight", "norm_f.weight": "output_norm.weight"}
        for name, load in tensors.items():
            if name.startswith("mtp."):
                continue
            if name == "lm_head.weight":
                out["output.weight"] = load
                continue
            prefix, _, rest = name.partition(".")
            if prefix not in ("backbone", "model"):
                raise SystemExit(f"unexpected Nemotron-H tensor {name}")
            if rest in top:
                out[top[rest]] = load
                continue
            parts = rest.split(".")  # layers.N.norm.weight | layers.N.mixer.<key>
            blk, kind, key = f"blk.{parts[1]}.", self.types[int(parts[1])], ".".join(parts[3:])
            if parts[2] == "norm":
                out[blk + "attn_norm.weight"] = load
            elif kind == "linear_attention":
                mamba2_tensor(out, blk, key, load, self.groups)
            elif kind == "full_attention":
                module, kind_ = key.rsplit(".", 1)
                attention_tensor(out, blk, module, kind_, load, self.attn_heads, self.kv)
            else:
                module, kind_ = key.rsplit(".", 1)
                out[f"{blk}{NEMOTRON_MLP_NAMES[module]}.{kind_}"] = load
        return out


FAMILIES = {"granitemoehybrid": GraniteHybrid, "nemotron_h": NemotronH}
