"""The Python API on a Hugging Face-layout checkpoint (config.json + safetensors + tokenizer.json) written by
`minfer make-test-model`: a byte-level BPE tokenizer (the real Qwen2 one when fetched) and a Qwen2-shaped model
with QKV bias and tied embeddings."""

from __future__ import annotations

import subprocess

import pytest

from minfer import Engine, SamplingParams
from pyapi_support import CACHE_DIR, ENGINE_ARGS


@pytest.fixture(scope="module")
def qwen_engine(minfer_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-qwen2")
    cmd = [str(minfer_bin), "make-test-model", "--preset", "tiny-qwen2", "--out", str(out), "--quiet"]
    tokenizer = CACHE_DIR / "qwen-tokenizer" / "tokenizer.json"
    if tokenizer.exists():
        cmd += ["--tokenizer", str(tokenizer)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    with Engine(model_path=out, **ENGINE_ARGS) as engine:
        yield engine


def test_byte_level_tokenizer_round_trip(qwen_engine):
    tok = qwen_engine.tokenizer
    text = "Héllo, 世界! 🙂 tabs\tand\nnewlines"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.encode(text, add_special_tokens=False) == ids  # Qwen adds no BOS
    assert tok.decode(tok.encode(text[:9])) == text[:9]


def test_generate_text_equals_token_ids_and_batch(qwen_engine):
    prompts = ["Hello world", "Once upon a time", "世界"]
    batch = qwen_engine.generate(prompts, max_new_tokens=12, temperature=0, ignore_eos=True)
    for prompt, r in zip(prompts, batch):
        alone = qwen_engine.generate(qwen_engine.tokenizer.encode(prompt), max_new_tokens=12, temperature=0,
                                     ignore_eos=True)
        assert r.token_ids == alone.token_ids and r.text == alone.text, prompt
        assert len(r.token_ids) == 12 and r.finish_reason == "length"


def test_skip_special_tokens_false_keeps_their_text(qwen_engine):
    special = qwen_engine.tokenizer.encode("<|im_start|>", add_special_tokens=False)
    assert len(special) == 1, special  # one control token
    forced = SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True, logit_bias={special[0]: 100})
    kept = qwen_engine.generate("Hello", sampling_params=forced.replace(skip_special_tokens=False))
    skipped = qwen_engine.generate("Hello", sampling_params=forced)
    assert kept.token_ids == skipped.token_ids == special * 3
    assert kept.text == "<|im_start|>" * 3 and skipped.text == ""
