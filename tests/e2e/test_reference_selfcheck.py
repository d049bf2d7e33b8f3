"""Validates the PyTorch oracle (tests/reference/hf_reference.py) independently of minfer.

The main check: llama2.c's stories260K checkpoint, converted to the HF layout in Python (Q/K rows permuted from
llama2.c's interleaved RoPE to HF's rotate_half, as HF's conversion script does), run greedily from BOS by the
oracle, gives exactly the 200 ids that llama2.c's own run.c produced (greedy_t0_n200.ids). That covers embedding,
RMSNorm, RoPE, GQA (8 query heads over 4 KV heads), SiLU MLP, tied lm_head and the KV cache.

The rest covers what stories260K does not: the safetensors reader (BF16, F16, shards), llama3 RoPE scaling against
Meta's original per-frequency formula, and Qwen2 biases / GQA / masking against a second, loop-based float64
implementation. None of this needs the minfer binary.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import REFERENCE_DIR, read_ids

import hf_reference as ref  # noqa: E402  (tests/reference is on sys.path via conftest)
import llama2c_to_hf  # noqa: E402

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


@pytest.fixture(scope="module")
def stories_hf(stories_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stories260K-hf")
    llama2c_to_hf.convert(str(stories_dir / "stories260K.bin"), str(out))
    return out


def test_oracle_reproduces_llama2c_greedy_ids(stories_dir, stories_hf):
    expected = read_ids(stories_dir / "greedy_t0_n200.ids")
    assert len(expected) == 200
    model = ref.Reference.from_dir(str(stories_hf))
    got = model.greedy([1], 200)  # from BOS, as run.c
    first_diff = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), None)
    assert got == expected, f"first difference at step {first_diff}"


def test_oracle_cli_matches_in_process(stories_hf, tmp_path):
    ids = [1, 403, 407, 261, 378]  # "Once upon a time" with tok512 (from the test-data manifest)
    logits_file = tmp_path / "logits.f32"
    proc = subprocess.run([PYTHON, str(REFERENCE_DIR / "hf_reference.py"), "--model", str(stories_hf), "--ids",
                           " ".join(map(str, ids)), "--greedy", "12", "--logits-out", str(logits_file)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    greedy = json.loads(proc.stdout)
    model = ref.Reference.from_dir(str(stories_hf))
    expected_logits = model.prompt_logits(ids)
    logits = np.fromfile(logits_file, dtype="<f4")
    assert logits.size == len(ids) * 512
    np.testing.assert_array_equal(logits.reshape(len(ids), 512), expected_logits)
    assert greedy == model.greedy(ids, 12)
    # Incremental decoding with the KV cache equals a full recompute of the longer prompt.
    full = model.prompt_logits(ids + greedy[:-1])
    assert full[len(ids) - 1:].argmax(-1).tolist() == greedy


# --- safetensors reader ----------------------------------------------------------------------------------------


def _write_raw_safetensors(path: Path, entries):
    """entries: list of (name, dtype, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_safetensors_reads_bf16_f16_f32(tmp_path):
    bf16_bits = [0x3F80, 0xC020, 0x3E20, 0x7F61, 0x8000, 0x477F]
    bf16_values = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bf16_bits]
    assert bf16_values[:3] == [1.0, -2.5, 0.15625] and bf16_values[5] == 65280.0
    f16_values = [1.0, -2.5, 0.15625, 1.0, -0.0, 65504.0]
    f32_values = [1.0, -2.5, 0.15625, 3.0e38, -0.0, 1e-30]
    path = tmp_path / "t.safetensors"
    _write_raw_safetensors(path, [("a", "BF16", [2, 3], struct.pack("<6H", *bf16_bits)),
                                  ("b", "F16", [6], np.array(f16_values, dtype="<f2").tobytes()),
                                  ("c", "F32", [3, 2], np.array(f32_values, dtype="<f4").tobytes())])
    t = ref.read_safetensors(str(path))
    assert all(v.dtype == np.float32 for v in t.values())
    assert t["a"].shape == (2, 3) and t["b"].shape == (6,) and t["c"].shape == (3, 2)
    np.testing.assert_array_equal(t["a"].ravel(), np.array(bf16_values, dtype=np.float32))
    assert math.copysign(1.0, t["a"].ravel()[4]) == -1.0
    np.testing.assert_array_equal(t["b"], np.array(f16_values, dtype=np.float32))
    np.testing.assert_array_equal(t["c"].ravel(), np.array(f32_values, dtype=np.float32))
    # A header that promises more data than the file holds is an error, not garbage.
    _write_raw_safetensors(path, [("a", "F32", [4], b"\0" * 12)])
    with pytest.raises(ValueError, match="data_offsets|shape"):
        ref.read_safetensors(str(path))


def test_safetensors_sharded_index(tmp_path):
    ref.write_safetensors(str(tmp_path / "model-00001-of-00002.safetensors"), {"x": np.arange(6.0).reshape(2, 3)})
    ref.write_safetensors(str(tmp_path / "model-00002-of-00002.safetensors"), {"y": np.ones(4)})
    index = {"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                                            "y": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    t = ref.load_hf_tensors(str(tmp_path))
    assert sorted(t) == ["x", "y"]
    np.testing.assert_array_equal(t["x"], np.arange(6.0).reshape(2, 3))
    index["weight_map"]["z"] = "model-00002-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="absent"):
        ref.load_hf_tensors(str(tmp_path))


# --- llama3 RoPE scaling -----------------------------------------------------------------------------------------


def test_llama3_inv_freq_matches_metas_formula():
    # Meta's apply_scaling (llama-models), one frequency at a time, in float64.
    scaling = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    head_dim, theta = 128, 500000.0
    base = ref.default_inv_freq(head_dim, theta)
    got = ref.llama3_inv_freq(base, scaling).double().numpy()
    regimes = set()
    for i, freq in enumerate(base.double().numpy()):
        wavelen = 2 * math.pi / freq
        if wavelen < 8192 / 4.0:
            want, regime = freq, "high"
        elif wavelen > 8192 / 1.0:
            want, regime = freq / 32.0, "low"
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            want, regime = (1 - smooth) * freq / 32.0 + smooth * freq, "medium"
        regimes.add(regime)
        assert got[i] == pytest.approx(want, rel=2e-6), (i, regime)
    assert regimes == {"high", "medium", "low"}


# --- a second, loop-based implementation for Qwen2 / Llama-3 features --------------------------------------------


def _naive_logits(cfg: dict, w: dict, ids):
    """Token-by-token, head-by-head, float64, with interleaved-free explicit rotation; no torch."""
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden = cfg["hidden_size"]
    D = hidden // H
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, D, 2) / D)
    rs = cfg.get("rope_scaling")
    if rs:
        out = []
        for f in inv:
            wl = 2 * math.pi / f
            lo, hi = rs["original_max_position_embeddings"] / rs["low_freq_factor"], \
                rs["original_max_position_embeddings"] / rs["high_freq_factor"]
            if wl < hi:
                out.append(f)
            elif wl > lo:
                out.append(f / rs["factor"])
            else:
                s = (rs["original_max_position_embeddings"] / wl - rs["low_freq_factor"]) / \
                    (rs["high_freq_factor"] - rs["low_freq_factor"])
                out.append((1 - s) * f / rs["factor"] + s * f)
        inv = np.array(out)
    g = {k: v.astype(np.float64) for k, v in w.items()}

    def norm(x, wt):
        return wt * x / math.sqrt(np.mean(x * x) + eps)

    def rope(vec, pos):
        outv = vec.copy()
        for j in range(D // 2):
            c, s = math.cos(pos * inv[j]), math.sin(pos * inv[j])
            a, b = vec[j], vec[j + D // 2]
            outv[j], outv[j + D // 2] = a * c - b * s, b * c + a * s
        return outv

    L = cfg["num_hidden_layers"]
    keys = [[] for _ in range(L)]
    vals = [[] for _ in range(L)]
    logits = []
    for pos, tok in enumerate(ids):
        h = g["model.embed_tokens.weight"][tok].copy()
        for l in range(L):
            p = f"model.layers.{l}."
            x = norm(h, g[p + "input_layernorm.weight"])
            proj = {}
            for n in "qkv":
                y = g[p + f"self_attn.{n}_proj.weight"] @ x
                if p + f"self_attn.{n}_proj.bias" in g:
                    y = y + g[p + f"self_attn.{n}_proj.bias"]
                proj[n] = y
            keys[l].append([rope(proj["k"][kh * D:(kh + 1) * D], pos) for kh in range(KV)])
            vals[l].append([proj["v"][kh * D:(kh + 1) * D] for kh in range(KV)])
            attn = np.zeros(H * D)
            for qh in range(H):
                kh = qh // (H // KV)
                q = rope(proj["q"][qh * D:(qh + 1) * D], pos)
                scores = np.array([q @ keys[l][t][kh] / math.sqrt(D) for t in range(pos + 1)])
                e = np.exp(scores - scores.max())
                e /= e.sum()
                attn[qh * D:(qh + 1) * D] = sum(e[t] * vals[l][t][kh] for t in range(pos + 1))
            h = h + g[p + "self_attn.o_proj.weight"] @ attn
            x = norm(h, g[p + "post_attention_layernorm.weight"])
            a = g[p + "mlp.gate_proj.weight"] @ x
            u = g[p + "mlp.up_proj.weight"] @ x
            h = h + g[p + "mlp.down_proj.weight"] @ (a / (1 + np.exp(-a)) * u)
        head = g.get("lm_head.weight", g["model.embed_tokens.weight"])
        logits.append(head @ norm(h, g["model.norm.weight"]))
    return np.array(logits)


def _random_model(tmp_path: Path, cfg: dict, biases: bool, tied: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    H, KV, hidden, inter, V = (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"],
                               cfg["intermediate_size"], cfg["vocab_size"])
    D = hidden // H
    w = {"model.embed_tokens.weight": rng.normal(0, 0.5, (V, hidden)),
         "model.norm.weight": rng.normal(1, 0.1, hidden)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = rng.normal(1, 0.1, hidden)
        w[p + "post_attention_layernorm.weight"] = rng.normal(1, 0.1, hidden)
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            w[p + f"self_attn.{n}_proj.weight"] = rng.normal(0, 0.3, (rows, hidden))
            if biases:
                w[p + f"self_attn.{n}_proj.bias"] = rng.normal(0, 0.5, rows)
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.3, (hidden, H * D))
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.3, (inter, hidden))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.3, (inter, hidden))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.3, (hidden, inter))
    if not tied:
        w["lm_head.weight"] = rng.normal(0, 0.5, (V, hidden))
    w = {k: v.astype(np.float32) for k, v in w.items()}
    ref.write_safetensors(str(tmp_path / "model.safetensors"), w)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return w


@pytest.mark.parametrize("arch", ["qwen2", "llama3"])
def test_oracle_matches_loop_implementation(tmp_path, arch):
    cfg = {"model_type": "qwen2" if arch == "qwen2" else "llama", "hidden_act": "silu", "hidden_size": 32,
           "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 50, "rms_norm_eps": 1e-6, "rope_theta": 1e6 if arch == "qwen2" else 500000.0,
           "tie_word_embeddings": arch == "qwen2"}
    if arch == "llama3":
        # head_dim 8, theta 5e5: wavelengths 6.3, 167, 4440, 1.2e5; an original context of 256 puts them in all
        # three regimes (< 64 kept, 64..256 smoothed, > 256 divided by the factor).
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 256}
    w = _random_model(tmp_path, cfg, biases=arch == "qwen2", tied=arch == "qwen2", seed=7)
    ids = [3, 17, 17, 42, 0, 8, 49, 5, 11, 30]
    want = _naive_logits(cfg, w, ids)
    model = ref.Reference.from_dir(str(tmp_path))
    got = model.prompt_logits(ids)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-5, err
    # Prefill in two chunks (KV cache across calls) gives the same logits.
    model.reset()
    chunked = np.concatenate([model.forward(ids[:4]).numpy(), model.forward(ids[4:]).numpy()])
    np.testing.assert_allclose(chunked, got, rtol=0, atol=1e-5 * np.abs(want).max())


def test_qwen2_requires_qkv_bias(tmp_path):
    cfg = {"model_type": "qwen2", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 5, "rms_norm_eps": 1e-6,
           "tie_word_embeddings": True}
    _random_model(tmp_path, cfg, biases=False, tied=True, seed=1)
    with pytest.raises(KeyError, match="q_proj.bias"):
        ref.Reference.from_dir(str(tmp_path))
