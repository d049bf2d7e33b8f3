"""The Qwen2.5-0.5B shape (random weights, `minfer make-test-model`) written as GGUF and quantized by llama.cpp's own
quantizer (llama_cpp.llama_model_quantize) into every type minfer reads: minfer's prompt logits must correlate with
llama.cpp's at 0.99 or better on each file (project venv).

Qwen2.5-0.5B's hidden size 896 is not a multiple of 256, so llama.cpp stores the K-quant and IQ4_XS files' 896-wide
matrices in its fallback types (Q5_0, Q5_1, Q8_0, IQ4_NL): each of those files mixes types, as real K-quant files do.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from conftest import REPO, ids_arg

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")

# llama.cpp's file types (llama.h, LLAMA_FTYPE_MOSTLY_*).
FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17,
          "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30}
PROMPT = [151643, 785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13, 576, 3974, 374, 264, 1273, 315, 4128]


@pytest.fixture(scope="module")
def source_gguf(minfer, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("qwen05")
    minfer.make_test_model("qwen2.5-0.5b", out / "hf", "bf16")
    sys.path.insert(0, str(REPO / "bench"))
    import hf_to_gguf
    sys.argv = ["hf_to_gguf.py", str(out / "hf"), str(out / "bf16.gguf"), "keep"]
    hf_to_gguf.main()
    return out / "bf16.gguf"


def quantize(source: Path, ftype: str) -> Path:
    out = source.parent / f"{ftype.lower()}.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize {ftype} failed ({rc})"
    return out


@pytest.mark.parametrize("ftype", list(FTYPES))
def test_prompt_logits_correlate_with_llamacpp(minfer, source_gguf, ftype, tmp_path):
    path = quantize(source_gguf, ftype)
    types = sorted({t.tensor_type.name for t in gguf.GGUFReader(path).tensors if t.tensor_type.name not in ("F32",)})
    llama = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, logits_all=True, type_k=0, type_v=0,
                            verbose=False)
    llama.eval(PROMPT)
    theirs = np.array(llama.scores[:len(PROMPT)], dtype=np.float32)
    del llama
    logits_file = tmp_path / "logits.f32"
    minfer.run("generate", "--model", path, "--prompt-ids", ids_arg(PROMPT), "-n", 1, "--temperature", 0,
               "--dump-prompt-logits", logits_file)
    ours = np.fromfile(logits_file, dtype="<f4").reshape(len(PROMPT), -1)[:, :theirs.shape[1]]
    corr = np.array([np.corrcoef(ours[i], theirs[i])[0, 1] for i in range(len(PROMPT))])
    print(f"{ftype} ({', '.join(types)}): per-row logit correlation min {corr.min():.5f} mean {corr.mean():.5f}")
    assert corr.min() >= 0.99
    path.unlink()
