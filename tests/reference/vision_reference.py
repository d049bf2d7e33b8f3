#!/usr/bin/python3
"""An independent PyTorch oracle for minfer's vision towers, written from the published Hugging Face modelling code
(modeling_siglip.py's SiglipVisionTransformer, modeling_gemma3.py's Gemma3MultiModalProjector), reading the
checkpoint with hf_reference's safetensors reader; and the maker of tiny random Gemma3ForConditionalGeneration
checkpoints (a text model from `minfer make-test-model` beside a random SigLIP tower and projector).

Semantics followed (f32 throughout):
  patches: Conv2d(3, hidden, kernel = stride = patch_size) with bias, flattened row-major, + position_embedding
  per layer: x = x + out_proj(attn(layer_norm1(x))); x = x + fc2(gelu_tanh(fc1(layer_norm2(x))))
  attention: q/k/v/out projections with biases, heads of hidden / heads, scores * head_dim^-0.5, no mask
  post_layernorm; projector: the [hidden, g, g] grid average-pooled by g / sqrt(mm_tokens_per_image), flattened
  row-major, Gemma3RMSNorm (x * rsqrt(mean(x^2) + eps) * (1 + w)), then @ mm_input_projection_weight
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Dict

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import load_hf_tensors, read_safetensors, write_safetensors  # noqa: E402

TOWER = "vision_tower.vision_model."


def tiny_vision_config() -> dict:
    # Awkward on purpose: 3 heads of 16, an intermediate that is no power of two, 64 patches pooled 2 x 2 to 16.
    return {"model_type": "siglip_vision_model", "hidden_size": 48, "intermediate_size": 72, "num_hidden_layers": 2,
            "num_attention_heads": 3, "patch_size": 4, "image_size": 32, "layer_norm_eps": 1e-6,
            "hidden_act": "gelu_pytorch_tanh", "vision_use_head": False}


# The tiny text model's special tokens that become Gemma 3's image tokens (minfer make-test-model's vocabulary
# has <|start_header_id|>, <|end_header_id|>, <|eom_id|> there), so a chat template's "<start_of_image>" is one token.
IMAGE_TOKENS = {633: "<start_of_image>", 634: "<end_of_image>", 635: "<image_soft_token>"}
BOI, EOI, IMAGE_TOKEN = 633, 634, 635


def rename_special_tokens(tokenizer_json: str) -> None:
    t = json.load(open(tokenizer_json))
    for tok in t["added_tokens"]:
        if tok["id"] in IMAGE_TOKENS:
            old, tok["content"] = tok["content"], IMAGE_TOKENS[tok["id"]]
            vocab = t["model"].get("vocab")
            if isinstance(vocab, dict) and old in vocab:
                vocab[tok["content"]] = vocab.pop(old)
    json.dump(t, open(tokenizer_json, "w"))


def make_tiny_gemma3_vision(text_dir: str, out_dir: str, seed: int = 0, image_token_index: int = IMAGE_TOKEN,
                            boi: int = BOI, eoi: int = EOI) -> None:
    """A Gemma3ForConditionalGeneration checkpoint: text_dir's gemma3_text model (renamed under language_model.model.,
    as the Hub's Gemma 3 checkpoints are) with a random SigLIP tower and projector."""
    os.makedirs(out_dir, exist_ok=True)
    text_config = json.load(open(os.path.join(text_dir, "config.json")))
    vc = tiny_vision_config()
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text_config,
              "vision_config": vc, "mm_tokens_per_image": 16, "image_token_index": image_token_index,
              "boi_token_index": boi, "eoi_token_index": eoi}
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "torch_dtype"):
        if key in text_config:
            config[key] = text_config[key]
    json.dump(config, open(os.path.join(out_dir, "config.json"), "w"), indent=1)
    json.dump({"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 32, "width": 32}, "resample": 2,
               "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3,
               "image_std": [0.5] * 3}, open(os.path.join(out_dir, "preprocessor_config.json"), "w"))
    for name in os.listdir(text_dir):
        if name.startswith("tokenizer") or name == "generation_config.json":
            with open(os.path.join(text_dir, name), "rb") as src, open(os.path.join(out_dir, name), "wb") as dst:
                dst.write(src.read())
    rename_special_tokens(os.path.join(out_dir, "tokenizer.json"))
    # Without a template of its own the model gets its family's, Gemma 3's, which writes <start_of_image> for images.
    tok_config_path = os.path.join(out_dir, "tokenizer_config.json")
    if os.path.exists(tok_config_path):
        tok_config = json.load(open(tok_config_path))
        tok_config.pop("chat_template", None)
        json.dump(tok_config, open(tok_config_path, "w"))
    tensors = {}
    for name, arr in read_safetensors(os.path.join(text_dir, "model.safetensors")).items():
        tensors["language_model." + name if name.startswith("model.") else "language_model." + name] = arr
    rng = np.random.default_rng(seed)
    h, inter, p = vc["hidden_size"], vc["intermediate_size"], vc["patch_size"]
    patches = (vc["image_size"] // p) ** 2

    def rand(*shape, std=0.2):
        return rng.normal(0, std, size=shape).astype(np.float32)

    tensors[TOWER + "embeddings.patch_embedding.weight"] = rand(h, 3, p, p, std=0.1)
    tensors[TOWER + "embeddings.patch_embedding.bias"] = rand(h, std=0.1)
    tensors[TOWER + "embeddings.position_embedding.weight"] = rand(patches, h, std=0.3)
    for i in range(vc["num_hidden_layers"]):
        lp = f"{TOWER}encoder.layers.{i}."
        for ln in ("layer_norm1", "layer_norm2"):
            tensors[lp + ln + ".weight"] = 1 + rand(h, std=0.1)
            tensors[lp + ln + ".bias"] = rand(h, std=0.1)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            tensors[lp + f"self_attn.{proj}.weight"] = rand(h, h, std=1 / math.sqrt(h))
            tensors[lp + f"self_attn.{proj}.bias"] = rand(h, std=0.05)
        tensors[lp + "mlp.fc1.weight"] = rand(inter, h, std=1 / math.sqrt(h))
        tensors[lp + "mlp.fc1.bias"] = rand(inter, std=0.05)
        tensors[lp + "mlp.fc2.weight"] = rand(h, inter, std=1 / math.sqrt(inter))
        tensors[lp + "mlp.fc2.bias"] = rand(h, std=0.05)
    tensors[TOWER + "post_layernorm.weight"] = 1 + rand(h, std=0.1)
    tensors[TOWER + "post_layernorm.bias"] = rand(h, std=0.1)
    tensors["multi_modal_projector.mm_soft_emb_norm.weight"] = rand(h, std=0.1)
    tensors["multi_modal_projector.mm_input_projection_weight"] = rand(h, text_config["hidden_size"],
                                                                       std=1 / math.sqrt(h))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)


class SiglipGemma3Reference:
    def __init__(self, model_dir: str):
        config = json.load(open(os.path.join(model_dir, "config.json")))
        self.vc = config["vision_config"]
        self.mm_tokens = config.get("mm_tokens_per_image", 256)
        self.t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in load_hf_tensors(model_dir).items()
                  if k.startswith(TOWER) or k.startswith("multi_modal_projector.")}

    def embeddings(self, pixel_values: np.ndarray) -> np.ndarray:
        """pixel_values [n, 3, H, W] -> the image tokens' embeddings [n, mm_tokens_per_image, text_hidden]."""
        t, vc = self.t, self.vc
        h, heads, eps = vc["hidden_size"], vc["num_attention_heads"], vc.get("layer_norm_eps", 1e-6)
        hd = h // heads
        px = torch.from_numpy(np.ascontiguousarray(pixel_values, dtype=np.float32))
        x = F.conv2d(px, t[TOWER + "embeddings.patch_embedding.weight"], t[TOWER + "embeddings.patch_embedding.bias"],
                     stride=vc["patch_size"])
        x = x.flatten(2).transpose(1, 2) + t[TOWER + "embeddings.position_embedding.weight"][None]
        n, N, _ = x.shape
        for i in range(vc["num_hidden_layers"]):
            lp = f"{TOWER}encoder.layers.{i}."

            def lin(v, name):
                return v @ t[lp + name + ".weight"].T + t[lp + name + ".bias"]

            y = F.layer_norm(x, (h,), t[lp + "layer_norm1.weight"], t[lp + "layer_norm1.bias"], eps)
            q, k, v = (lin(y, f"self_attn.{p}").view(n, N, heads, hd).transpose(1, 2) for p in ("q_proj", "k_proj",
                                                                                                  "v_proj"))
            w = torch.softmax(q @ k.transpose(-1, -2) * hd ** -0.5, dim=-1, dtype=torch.float32)
            a = (w @ v).transpose(1, 2).reshape(n, N, h)
            x = x + lin(a, "self_attn.out_proj")
            y = F.layer_norm(x, (h,), t[lp + "layer_norm2.weight"], t[lp + "layer_norm2.bias"], eps)
            x = x + lin(F.gelu(lin(y, "mlp.fc1"), approximate="tanh"), "mlp.fc2")
        x = F.layer_norm(x, (h,), t[TOWER + "post_layernorm.weight"], t[TOWER + "post_layernorm.bias"], eps)
        g = int(round(math.sqrt(N)))
        kernel = g // int(round(math.sqrt(self.mm_tokens)))
        pooled = F.avg_pool2d(x.transpose(1, 2).reshape(n, h, g, g), kernel, kernel).flatten(2).transpose(1, 2)
        normed = pooled * torch.rsqrt(pooled.pow(2).mean(-1, keepdim=True) + eps)
        normed = normed * (1.0 + t["multi_modal_projector.mm_soft_emb_norm.weight"])
        return (normed @ t["multi_modal_projector.mm_input_projection_weight"]).numpy()
