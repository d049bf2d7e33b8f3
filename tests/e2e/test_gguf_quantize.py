"""`minfer quantize IN OUT.gguf --type T` against llama.cpp (project venv):
- from a GGUF (SmolLM2, Q4_1), each file type's output equals llama.cpp's own quantizer's
  (llama_cpp.llama_model_quantize on the same input) byte for byte: same tensors, same types, same blocks;
- llama.cpp loads minfer's file, and its prompt logits agree with minfer's on that file;
- from a Hugging Face directory (tiny-llama: llama.cpp's q/k row order; tiny-qwen2: tied embeddings; tiny-qwen3: q/k
  norms, explicit head_dim), llama.cpp
  loads the file, tokenizes as minfer does from tokenizer.json, and its logits agree with minfer's on the directory
  and on the file;
  for Qwen2 (which bench/hf_to_gguf.py also writes), the bytes equal llama.cpp's quantization of that writer's file;
- what cannot be written is refused by name."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, ids_arg

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")
gguf = pytest.importorskip("gguf", reason="gguf-py is in the project venv (scripts/setup-venv.sh)")

# minfer's --type names and llama.cpp's file types (llama.h, LLAMA_FTYPE_MOSTLY_*).
FTYPES = {"Q4_0": 2, "Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "F16": 1, "BF16": 32}
TEXT = "The quick brown fox jumps over the lazy dog. It's 2024 -- isn't it? 12345 apples!"


def llamacpp_quantize(source: Path, out: Path, ftype: str) -> Path:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = 2
    params.allow_requantize = True
    assert llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params)) == 0
    return out


def assert_same_tensors(ours: Path, theirs: Path) -> list:
    a = {t.name: t for t in gguf.GGUFReader(ours).tensors}
    b = {t.name: t for t in gguf.GGUFReader(theirs).tensors}
    assert list(a) == list(b), "tensor names or order differ"
    for name, t in a.items():
        assert t.tensor_type == b[name].tensor_type, f"{name}: {t.tensor_type.name} vs llama.cpp's {b[name].tensor_type.name}"
        assert np.asarray(t.data).tobytes() == np.asarray(b[name].data).tobytes(), f"{name} ({t.tensor_type.name}): bytes differ"
    return sorted({t.tensor_type.name for t in a.values()})


def llamacpp_logits(path: Path, prompt: list, n_ctx: int = 256) -> np.ndarray:
    llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=2, logits_all=True, type_k=0, type_v=0,
                            verbose=False)
    llama.eval(prompt)
    logits = np.array(llama.scores[:len(prompt)], dtype=np.float32)
    del llama
    return logits


def minfer_logits(minfer, model, prompt: list, out: Path, vocab: int) -> np.ndarray:
    minfer.run("generate", "--model", model, "--prompt-ids", ids_arg(prompt), "-n", 1, "--temperature", 0,
               "--dump-prompt-logits", out)
    return np.fromfile(out, dtype="<f4").reshape(len(prompt), -1)[:, :vocab]


def min_logit_correlation(minfer, llamacpp_file: Path, minfer_model: Path, prompt: list, tmp_path: Path) -> float:
    """The smallest per-position correlation of llama.cpp's prompt logits on one file with minfer's on a model."""
    theirs = llamacpp_logits(llamacpp_file, prompt)
    ours = minfer_logits(minfer, minfer_model, prompt, tmp_path / "logits.f32", theirs.shape[1])
    return min(np.corrcoef(ours[i], theirs[i])[0, 1] for i in range(len(prompt)))


@pytest.mark.parametrize("ftype", list(FTYPES))
def test_from_gguf_equals_llamacpp_quantize_and_llamacpp_runs_it(minfer, smollm2_gguf, ftype, tmp_path):
    ours = tmp_path / "ours.gguf"
    proc = minfer.run("quantize", smollm2_gguf, ours, "--type", ftype)
    assert f"({ftype})" in proc.stdout
    types = assert_same_tensors(ours, llamacpp_quantize(smollm2_gguf, tmp_path / "theirs.gguf", ftype))
    print(f"{ftype}: byte-identical to llama.cpp's ({', '.join(types)})")
    reader = gguf.GGUFReader(ours)
    assert int(reader.fields["general.file_type"].parts[-1][0]) == FTYPES[ftype]
    prompt = [1, 504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 657, 314, 253, 1179, 282, 3458]
    corr = min_logit_correlation(minfer, ours, ours, prompt, tmp_path)
    print(f"{ftype}: minfer vs llama.cpp on minfer's file, min per-row logit correlation {corr:.5f}")
    assert corr >= 0.99


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen2", "tiny-qwen3"])
def test_from_hf_directory_llamacpp_loads_tokenizes_and_agrees(minfer, tiny_models, preset, tmp_path):
    hf = tiny_models(preset, "f32")
    ours = tmp_path / "ours.gguf"
    minfer.run("quantize", hf, ours, "--type", "Q8_0")
    llama = llama_cpp.Llama(model_path=str(ours), n_ctx=256, n_threads=2, verbose=False)
    ids = minfer.run("tokenize", "--tokenizer", hf / "tokenizer.json", "--text", TEXT, "--no-special").stdout.split()
    assert llama.tokenize(TEXT.encode(), add_bos=False, special=False) == [int(i) for i in ids]
    del llama
    prompt = [5, 17, 99, 3, 42, 7, 200, 31, 64, 12, 300]
    corr = min_logit_correlation(minfer, ours, hf, prompt, tmp_path)
    print(f"{preset}: llama.cpp on minfer's Q8_0 file vs minfer on the f32 directory: min correlation {corr:.5f}")
    assert corr >= 0.99
    # minfer's GGUF reader on the same file (its architecture keys and tensor names) agrees as well.
    assert min_logit_correlation(minfer, ours, ours, prompt, tmp_path) >= 0.99


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q6_K"])
def test_from_hf_directory_equals_llamacpp_quantize_of_the_converted_file(minfer, tiny_models, ftype, tmp_path):
    hf = tiny_models("tiny-qwen2", "f32")
    sys.path.insert(0, str(REPO / "bench"))
    import hf_to_gguf
    sys.argv = ["hf_to_gguf.py", str(hf), str(tmp_path / "f32.gguf"), "keep"]
    hf_to_gguf.main()
    minfer.run("quantize", hf, tmp_path / "ours.gguf", "--type", ftype)
    assert_same_tensors(tmp_path / "ours.gguf", llamacpp_quantize(tmp_path / "f32.gguf", tmp_path / "theirs.gguf", ftype))


def test_refusals_name_the_problem(minfer, smollm2_gguf, tmp_path):
    proc = minfer.run("quantize", smollm2_gguf, tmp_path / "x.gguf", "--type", "IQ2_XXS", check=False)
    assert proc.returncode != 0 and "IQ2_XXS" in proc.stderr and "Q4_K_M" in proc.stderr
    proc = minfer.run("quantize", smollm2_gguf, tmp_path / "missing" / "x.gguf", "--type", "Q8_0", check=False)
    assert proc.returncode != 0 and "missing/x.gguf" in proc.stderr
    assert not (tmp_path / "missing").exists()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 12)
    proc = minfer.run("quantize", bad, tmp_path / "y.gguf", "--type", "Q8_0", check=False)
    assert proc.returncode != 0 and "bad.gguf" in proc.stderr
    assert not (tmp_path / "y.gguf").exists()
