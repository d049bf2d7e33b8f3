#!/usr/bin/env python3
"""Writes the vision tower and projector of a Hugging Face Gemma3ForConditionalGeneration directory as a llama.cpp
projector GGUF (an "mmproj" file) with gguf-py's GGUFWriter, in the layout llama.cpp's converter gives it
(conversion/gemma.py's Gemma3VisionModel over MmprojModel): clip.* keys, v.* / mm.* tensor names, the projector's
soft_emb_norm stored as 1 + w, mm.input_projection.weight as transformers holds it ([vision hidden, text hidden]).
Usage (project venv): gguf_py_vision.py MODEL_DIR OUT.gguf"""

from __future__ import annotations

import json
import math
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import load_hf_tensors  # noqa: E402

TOWER = "vision_tower.vision_model."
LAYER_NAMES = {"layer_norm1": "ln1", "layer_norm2": "ln2", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.out_proj": "attn_out", "mlp.fc1": "ffn_up",
               "mlp.fc2": "ffn_down"}
GLOBAL_NAMES = {"embeddings.patch_embedding.weight": "v.patch_embd.weight",
                "embeddings.patch_embedding.bias": "v.patch_embd.bias",
                "embeddings.position_embedding.weight": "v.position_embd.weight",
                "post_layernorm.weight": "v.post_ln.weight", "post_layernorm.bias": "v.post_ln.bias"}


def gguf_name(hf: str) -> str:
    if hf == "multi_modal_projector.mm_input_projection_weight":
        return "mm.input_projection.weight"
    if hf == "multi_modal_projector.mm_soft_emb_norm.weight":
        return "mm.soft_emb_norm.weight"
    rest = hf[len(TOWER):]
    if rest in GLOBAL_NAMES:
        return GLOBAL_NAMES[rest]
    layer, rest = rest[len("encoder.layers."):].split(".", 1)
    module, kind = rest.rsplit(".", 1)
    return f"v.blk.{layer}.{LAYER_NAMES[module]}.{kind}"


def write_gemma3_mmproj(model_dir: str, out_path: str) -> None:
    config = json.load(open(os.path.join(model_dir, "config.json")))
    processor = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
    vc = config["vision_config"]
    w = gguf.GGUFWriter(out_path, "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(config["text_config"]["hidden_size"])
    w.add_vision_image_size(vc["image_size"])
    w.add_vision_patch_size(vc["patch_size"])
    w.add_vision_embedding_length(vc["hidden_size"])
    w.add_vision_feed_forward_length(vc["intermediate_size"])
    w.add_vision_block_count(vc["num_hidden_layers"])
    w.add_vision_head_count(vc["num_attention_heads"])
    w.add_vision_image_mean(processor["image_mean"])
    w.add_vision_image_std(processor["image_std"])
    w.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    w.add_vision_attention_layernorm_eps(vc.get("layer_norm_eps", 1e-6))
    w.add_vision_use_gelu(True)
    side = int(math.isqrt(config.get("mm_tokens_per_image", 256)))
    scale = (vc["image_size"] // vc["patch_size"]) // side
    if scale != 4:
        w.add_vision_projector_scale_factor(scale)
    for name, arr in load_hf_tensors(model_dir).items():
        if not (name.startswith(TOWER) or name.startswith("multi_modal_projector.")):
            continue
        data = np.ascontiguousarray(arr, dtype=np.float32)
        if name.endswith("mm_soft_emb_norm.weight"):
            data = data + 1
        w.add_tensor(gguf_name(name), data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write_gemma3_mmproj(sys.argv[1], sys.argv[2])
