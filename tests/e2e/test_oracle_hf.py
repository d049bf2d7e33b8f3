"""minfer against the independent PyTorch oracle (tests/reference/hf_reference.py) on HF-layout test models.

For tiny-llama (Llama 3 layout with llama3 RoPE scaling, untied lm_head), tiny-qwen2 (QKV bias, tied embeddings) and
tiny-qwen3 (per-head q/k norms, head_dim 32 with 4 heads of a 64-wide model), tiny-gemma3 (sandwich norms with
(1 + w) weights, GELU(tanh), scaled embeddings, query_pre_attn_scalar, two sliding-window layers with their own RoPE base
and a global one) and tiny-gemma2 (Gemma's block without q/k norms, sliding and global layers alternating, scores
soft-capped at 5 and logits at 4) tiny-smollm3 (every second layer without positional encoding), tiny-olmo2 (post norms only,
q/k norms over the whole projection) and tiny-olmo3 (OLMo 2's block with a window on three of four layers, which rotate
unscaled, and YaRN on the fourth), tiny-granite (embedding, attention, residual and logit multipliers) and tiny-gpt-oss
(q/k/v/o biases, attention sinks, alternating windows, YaRN, biased experts with the clamped SwiGLU), each in
f32 and bf16 weights, written by `minfer make-test-model`:
  * the prompt's logits (every position) from `minfer generate --dump-prompt-logits` against the oracle's;
    error metric: for each row (position), max |engine - oracle| / max |oracle|, and the worst row must be below
    1e-4 (f32 weights) or 3e-2 (bf16 weights, measured up to 2.2e-2 on tiny-phi3; the oracle upcasts bf16 to f32 and
    computes in f32, the engine may round activations to bf16 inside its bf16 kernels);
  * with f32 weights, 32 greedy tokens (--ignore-eos, so the count is fixed) identical to the oracle's.
Also a sharded checkpoint (model.safetensors.index.json) of tiny-qwen2 in f32, and sliding windows shrunk to 8 positions
(the prompt and the generated tokens run far past them), with and without fusion: tiny-gemma3 (with soft-capping of
the attention scores and the logits switched on), tiny-mistral, tiny-qwen2 with use_sliding_window.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import hf_reference as ref
from conftest import describe, ids_arg, read_config, read_ids

PROMPT = ("The little robot walked slowly through the quiet garden, looking at every flower it passed. "
          "It had never seen so many colours before. When the sun went down, it sat on a bench and waited.")

TOLERANCE = {"f32": 1e-4, "bf16": 3e-2}
# Mixture-of-experts presets whose bf16 prompt has positions where router logits nearly tie (tiny-gpt-oss: about a
# fifth of its 88 within 0.05 over its two layers): the engine's bf16 activation rounding routes some of them to the
# other expert (errors up to 0.58 there, 3e-6 for the same weights upcast to f32), so only the typical error is
# bounded: the median below half the tolerance (measured 0.010) and 75% of the positions within it (measured 86%).
# tiny-lfm2-moe's sigmoid router flips at 3 of its 89 positions (errors 0.28, 0.16, 0.10; median 0.010), and
# tiny-granite-4.0-h's (4 experts, top 2) at a few (0.13, 0.09, 0.08; median 0.013).
ROUTING_FLIPS_IN_BF16 = {"tiny-gpt-oss", "tiny-lfm2-moe", "tiny-granite-4.0-h"}
# Presets whose bf16 logits move more under the engine's bf16-rounded activations than the tolerance allows, because
# the model itself is that sensitive: tiny-qwen3.5's oracle, its linear layers' inputs rounded to bf16, moves by up to
# 5.8% (median 1.3%; tiny-qwen3's by 1.2%): the delta rule carries every rounding into the state of later tokens. The
# engine measured 7.5% max, 1.8% median. tiny-lfm2's oracle with every weight product's input rounded to bf16 moves by
# 3.14% max (median 0.95%), and so does the engine (3.14%): its two multiplicative gates around the convolution.
# Bounded here: max below the value, median below the usual tolerance.
SENSITIVE_IN_BF16 = {"tiny-qwen3.5": 0.12, "tiny-lfm2": 0.05}
GREEDY_TOKENS = 32

_oracles = {}


def oracle(model_dir, max_seq_len: int = 0) -> ref.Reference:
    """The reference, with longrope's factors chosen as the engine chooses them for its context: `generate` runs
    with max_seq_len, or the model's context capped at 8192 when 0."""
    key = str(model_dir)
    if key not in _oracles:
        _oracles[key] = ref.Reference.from_dir(key)
    config = read_config(model_dir)
    context = max_seq_len or min(config["max_position_embeddings"], 8192)
    _oracles[key].long_context = context > config.get("original_max_position_embeddings", context)
    return _oracles[key]


def relative_error(engine: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per row: max |engine - expected| / max |expected|."""
    return np.abs(engine - expected).max(axis=1) / np.abs(expected).max(axis=1)


def run_engine(minfer, model_dir, ids, tmp_path, *flags):
    # An f32 KV cache, as the oracle keeps K and V (the engine's default for bf16 weights is a bf16 cache).
    logits_file = tmp_path / "prompt_logits.f32"
    ids_file = tmp_path / "generated.ids"
    proc = minfer.run("generate", "--model", model_dir, "--prompt-ids", ids_arg(ids), "--max-new-tokens",
                      GREEDY_TOKENS, "--temperature", 0, "--ignore-eos", "--dump-prompt-logits", logits_file,
                      "--ids-out", ids_file, "--kv-cache-dtype", "f32", *flags)
    assert logits_file.exists(), f"--dump-prompt-logits wrote nothing\n{describe(proc)}"
    assert ids_file.exists(), f"--ids-out wrote nothing\n{describe(proc)}"
    vocab = read_config(model_dir)["vocab_size"]
    raw = np.fromfile(logits_file, dtype="<f4")
    assert raw.size == len(ids) * vocab, (
        f"prompt logits file holds {raw.size} floats, expected {len(ids)} ids x {vocab} vocab = {len(ids) * vocab}")
    return raw.reshape(len(ids), vocab), read_ids(ids_file)


CASES = [("tiny-llama", "f32"), ("tiny-llama", "bf16"), ("tiny-qwen2", "f32"), ("tiny-qwen2", "bf16"),
         ("tiny-qwen3", "f32"), ("tiny-qwen3", "bf16"), ("tiny-gemma2", "f32"), ("tiny-gemma2", "bf16"),
         ("tiny-gemma3", "f32"), ("tiny-gemma3", "bf16"),
         ("tiny-mistral", "f32"), ("tiny-mistral", "bf16"), ("tiny-phi3", "f32"), ("tiny-phi3", "bf16"),
         ("tiny-qwen3-moe", "f32"), ("tiny-qwen3-moe", "bf16"), ("tiny-mixtral", "f32"), ("tiny-mixtral", "bf16"),
         ("tiny-smollm3", "f32"), ("tiny-smollm3", "bf16"), ("tiny-olmo2", "f32"), ("tiny-olmo2", "bf16"),
         ("tiny-olmo3", "f32"), ("tiny-olmo3", "bf16"), ("tiny-granite", "f32"), ("tiny-granite", "bf16"),
         ("tiny-gpt-oss", "f32"), ("tiny-gpt-oss", "bf16"), ("tiny-qwen3.5", "f32"), ("tiny-qwen3.5", "bf16"),
         ("tiny-lfm2", "f32"), ("tiny-lfm2", "bf16"), ("tiny-qwen3.5-moe", "f32"),
         ("tiny-granite-4.0-h", "f32"), ("tiny-granite-4.0-h", "bf16"), ("tiny-qwen3-next", "f32"),
         ("tiny-lfm2-moe", "f32"), ("tiny-lfm2-moe", "bf16"), ("tiny-nemotron-h", "f32"), ("tiny-nemotron-h", "bf16")]
# tiny-qwen3.5-moe in bf16 is not compared: bf16-rounded activations both flip near-tied routing decisions (as for
# tiny-gpt-oss) and move the delta rule's state (as for tiny-qwen3.5), 1.15 at the worst position; its f32 case and
# tiny-qwen3.5's bf16 case cover the kernels.


@pytest.mark.parametrize("preset,dtype", CASES, ids=[f"{p}-{d}" for p, d in CASES])
def test_engine_matches_oracle(minfer, tiny_models, preset, dtype, tmp_path):
    model_dir = tiny_models(preset, dtype)
    ids = minfer.tokenize(model_dir / "tokenizer.json", PROMPT)
    assert 20 <= len(ids) <= 200, f"unexpected prompt length {len(ids)}: {ids}"
    engine_logits, engine_ids = run_engine(minfer, model_dir, ids, tmp_path)
    assert np.isfinite(engine_logits).all(), "engine logits contain NaN/inf"

    model = oracle(model_dir)
    expected = model.prompt_logits(ids)
    err = relative_error(engine_logits, expected)
    if preset in ROUTING_FLIPS_IN_BF16 and dtype == "bf16":
        # Near ties between a position's last chosen and first unchosen expert are decided by the bf16 activation
        # rounding, and a flipped position moves the later ones through attention: bound the typical error.
        assert np.median(err) < TOLERANCE[dtype] / 2 and np.mean(err < TOLERANCE[dtype]) >= 0.75, (
            f"{preset} {dtype}: per-position errors {np.array2string(err, precision=2)}")
        print(f"{preset} {dtype}: per-position error median {np.median(err):.2e}, max {err.max():.2e} "
              f"({np.mean(err >= TOLERANCE[dtype]):.0%} of positions above the tolerance)")
        err = np.minimum(err, 0.0)
    worst = int(err.argmax())
    if dtype == "bf16" and preset in SENSITIVE_IN_BF16:
        assert np.median(err) < TOLERANCE[dtype] and err.max() < SENSITIVE_IN_BF16[preset], (
            f"{preset} {dtype}: per-position errors {np.array2string(err, precision=2)}")
        err = np.minimum(err, 0.0)
    assert err.max() < TOLERANCE[dtype], (
        f"{preset} {dtype}: logits relative error {err.max():.3g} at prompt position {worst} "
        f"(tolerance {TOLERANCE[dtype]}); per-position errors {np.array2string(err, precision=2)}")

    expected_ids = model.greedy(ids, GREEDY_TOKENS)
    agree = sum(a == b for a, b in zip(engine_ids, expected_ids))
    print(f"{preset} {dtype}: {len(ids)} prompt ids, vocab {expected.shape[1]}, logits max relative error "
          f"{err.max():.2e}, greedy agreement {agree}/{GREEDY_TOKENS}")
    assert len(engine_ids) == GREEDY_TOKENS, f"engine generated {len(engine_ids)} ids: {engine_ids}"
    if dtype == "f32":
        first = next((i for i, (a, b) in enumerate(zip(engine_ids, expected_ids)) if a != b), None)
        assert engine_ids == expected_ids, (
            f"greedy tokens differ from step {first}:\nengine {engine_ids}\noracle {expected_ids}")


def test_sharded_checkpoint_matches_oracle(minfer, tiny_models, tmp_path):
    model_dir = tiny_models("tiny-qwen2", "f32", "--shard-size", "200000")
    assert (model_dir / "model.safetensors.index.json").exists(), "--shard-size wrote no index"
    ids = minfer.tokenize(model_dir / "tokenizer.json", PROMPT)
    engine_logits, engine_ids = run_engine(minfer, model_dir, ids, tmp_path)
    model = oracle(model_dir)
    assert relative_error(engine_logits, model.prompt_logits(ids)).max() < TOLERANCE["f32"]
    assert engine_ids == model.greedy(ids, GREEDY_TOKENS)


# The window (8 positions) bites: Gemma 3's local layers (and soft-capping of scores and logits), Gemma 2's even
# layers (with its own caps), Mistral's every layer, Qwen2's layers from max_window_layers on.
WINDOWED = {"tiny-gemma3": dict(sliding_window=8, attn_logit_softcapping=2.0, final_logit_softcapping=5.0),
            "tiny-gemma2": dict(sliding_window=8),
            "tiny-olmo3": dict(sliding_window=8),
            "tiny-mistral": dict(sliding_window=8),
            "tiny-qwen2": dict(sliding_window=8, use_sliding_window=True, max_window_layers=1),
            "tiny-phi3": dict(sliding_window=8),
            "tiny-gpt-oss": dict(sliding_window=8)}


@pytest.mark.parametrize("preset", list(WINDOWED))
@pytest.mark.parametrize("fusion", ["auto", "none"])
def test_sliding_window_matches_oracle(minfer, tiny_models, preset, fusion, tmp_path):
    src = tiny_models(preset, "f32")
    model_dir = tmp_path / f"{preset}-window8"
    shutil.copytree(src, model_dir)
    config = read_config(model_dir)
    config.update(WINDOWED[preset])
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    ids = minfer.tokenize(model_dir / "tokenizer.json", PROMPT)
    assert len(ids) > 3 * config["sliding_window"]
    engine_logits, engine_ids = run_engine(minfer, model_dir, ids, tmp_path, "--fusion", fusion)
    model = oracle(model_dir)
    expected = model.prompt_logits(ids)
    err = relative_error(engine_logits, expected)
    assert err.max() < TOLERANCE["f32"], f"logits relative error {err.max():.3g} at position {int(err.argmax())}"
    # The window matters: the same model without it computes other logits past the window.
    config.update(sliding_window=4096)
    config.pop("layer_types", None)
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    unwindowed = ref.Reference.from_dir(str(model_dir))
    unwindowed.long_context = model.long_context
    unwindowed = unwindowed.prompt_logits(ids)
    assert relative_error(unwindowed, expected)[3 * 8:].min() > 1e-3
    assert engine_ids == model.greedy(ids, GREEDY_TOKENS)


# YaRN (Qwen3's long-context setting) with an original context of 64, so that the ramp leaves only the fastest
# dimensions unscaled and the blend bites on this prompt; once with transformers' defaults (betas 32 / 1, attention
# factor 0.1 ln(4) + 1), once with every knob given.
YARN = [dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64),
        dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=48, beta_fast=16, beta_slow=2,
             attention_factor=1.1, truncate=False)]


@pytest.mark.parametrize("scaling", YARN, ids=["defaults", "explicit"])
@pytest.mark.parametrize("fusion", ["auto", "none"])
def test_yarn_rope_scaling_matches_oracle(minfer, tiny_models, scaling, fusion, tmp_path):
    model_dir = tmp_path / "tiny-qwen3-yarn"
    shutil.copytree(tiny_models("tiny-qwen3", "f32"), model_dir)
    config = read_config(model_dir)
    config["rope_scaling"] = scaling
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    ids = minfer.tokenize(model_dir / "tokenizer.json", PROMPT)
    engine_logits, engine_ids = run_engine(minfer, model_dir, ids, tmp_path, "--fusion", fusion)
    model = oracle(model_dir)
    expected = model.prompt_logits(ids)
    err = relative_error(engine_logits, expected)
    assert err.max() < TOLERANCE["f32"], f"logits relative error {err.max():.3g} at position {int(err.argmax())}"
    assert engine_ids == model.greedy(ids, GREEDY_TOKENS)
    config["rope_scaling"] = None  # the scaling matters: without it the logits differ
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    assert relative_error(ref.Reference.from_dir(str(model_dir)).prompt_logits(ids), expected).max() > 1e-3


@pytest.mark.parametrize("max_seq_len", [4096, 8192])
def test_phi3_longrope_factors_follow_the_context(minfer, tiny_models, max_seq_len, tmp_path):
    """tiny-phi3's longrope (original context 4096): short factors for an engine context within it, long ones past
    it, each against the reference with the same choice (and the two choices give different logits)."""
    model_dir = tiny_models("tiny-phi3", "f32")
    ids = minfer.tokenize(model_dir / "tokenizer.json", PROMPT)
    engine_logits, engine_ids = run_engine(minfer, model_dir, ids, tmp_path, "--max-model-len", max_seq_len)
    model = oracle(model_dir, max_seq_len)
    assert model.long_context == (max_seq_len > 4096)
    expected = model.prompt_logits(ids)
    assert relative_error(engine_logits, expected).max() < TOLERANCE["f32"]
    assert engine_ids == model.greedy(ids, GREEDY_TOKENS)
    model.long_context = not model.long_context
    assert relative_error(engine_logits, model.prompt_logits(ids)).max() > 1e-3


def test_gpt_oss_sinks_and_expert_biases_matter(tiny_models):
    """The tiny gpt-oss model exercises what the oracle case checks: without its sinks, or without its experts'
    biases, the reference computes other logits (so an engine ignoring them could not pass)."""
    model_dir = tiny_models("tiny-gpt-oss", "f32")
    ids = list(range(3, 60))
    model = ref.Reference.from_dir(str(model_dir))
    expected = model.prompt_logits(ids)
    for layer in model.layers:
        layer["sinks"] = layer["sinks"] - 1e4
    assert relative_error(model.prompt_logits(ids), expected).max() > 1e-2
    model = ref.Reference.from_dir(str(model_dir))
    for layer in model.layers:
        router, router_bias, gate_up, gate_up_bias, down, down_bias = layer["moe"]
        layer["moe"] = (router, router_bias, gate_up, gate_up_bias * 0, down, down_bias * 0)
    assert relative_error(model.prompt_logits(ids), expected).max() > 1e-2
