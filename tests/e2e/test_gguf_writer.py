"""bench/hf_to_gguf.py, the GGUF writer of the llama.cpp comparison (bench/llamacpp_compare.sh), writes files minfer
reads back as the same model: with the weights kept, greedy ids and text from the GGUF (its own tokenizer
metadata included) equal those from the Hugging Face directory; a Q8_0 file loads and runs through the Q8_0
kernels; what it cannot write it refuses by name."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, read_ids

WRITER = REPO / "bench" / "hf_to_gguf.py"


def write_gguf(model, out, outtype) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WRITER), str(model), str(out), outtype], capture_output=True, text=True,
                          timeout=300)


def greedy(minfer, model, ids_out, *prompt):
    proc = minfer.run("generate", "-m", model, *prompt, "-n", 24, "--temperature", 0, "--ignore-eos", "-t", 1,
                      "--ids-out", ids_out)
    return read_ids(ids_out), proc.stdout.split("[")[0]  # the text, before the timing log line


def test_kept_weights_give_the_same_greedy_ids_and_text(minfer, tiny_models, tmp_path):
    hf = tiny_models("tiny-qwen2", "f32")
    gguf = tmp_path / "tiny.gguf"
    proc = write_gguf(hf, gguf, "keep")
    assert proc.returncode == 0, proc.stderr
    for prompt in (["--prompt-ids", "5 17 99 3"], ["-p", "The quick brown fox"]):
        want = greedy(minfer, hf, tmp_path / "hf.ids", *prompt)
        got = greedy(minfer, gguf, tmp_path / "gguf.ids", *prompt)
        assert got == want, f"prompt {prompt}"
        assert len(got[0]) == 24


def test_q8_0_file_loads_and_generates(minfer, tiny_models, tmp_path):
    hf = tiny_models("tiny-qwen2", "f32")
    gguf = tmp_path / "tiny-q8_0.gguf"
    proc = write_gguf(hf, gguf, "q8_0")
    assert proc.returncode == 0, proc.stderr
    ids, _ = greedy(minfer, gguf, tmp_path / "q8.ids", "--prompt-ids", "5 17 99 3")
    assert len(ids) == 24
    # Q8_0 takes 34 bytes per 32 weights where f32 takes 128: the file is about a quarter of the kept one's size.
    kept = tmp_path / "tiny.gguf"
    assert write_gguf(hf, kept, "keep").returncode == 0
    assert gguf.stat().st_size < 0.4 * kept.stat().st_size


def test_refuses_other_architectures_by_name(minfer, tiny_models, tmp_path):
    proc = write_gguf(tiny_models("tiny-llama", "f32"), tmp_path / "llama.gguf", "keep")
    assert proc.returncode != 0
    assert "model_type 'llama'" in proc.stderr and "only qwen2" in proc.stderr, proc.stderr
    assert not (tmp_path / "llama.gguf").exists()
