"""GGUF quantization types against gguf-py (llama.cpp's own numpy dequantizers; needs the project venv):
  * every type minfer reads dequantizes to exactly gguf-py's f32, on random blocks (written with gguf-py's
    quantizers where it has one, random bytes with sane scales otherwise) and on real tensors of both PyPI models;
  * a type minfer does not read is refused naming the file, the tensor and the type.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

SUPPORTED = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS,
             T.MXFP4]

# Byte offsets of the f16 scale fields in one block of the types gguf-py cannot quantize.
F16_FIELDS = {T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_NL: [0],
              T.IQ4_XS: [0]}


def random_blocks(rng: np.random.Generator, qtype: T, rows: int, cols: int) -> np.ndarray:
    """Rows x cols elements of qtype as the uint8 block bytes gguf-py uses."""
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    try:
        return gguf.quants.quantize(values, qtype)
    except NotImplementedError:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
        for at in F16_FIELDS[qtype]:
            raw[:, at:at + 2] = rng.uniform(-0.05, 0.05, size=len(raw)).astype(np.float16).view(np.uint8).reshape(-1, 2)
        return raw.reshape(rows, -1)


def dump(minfer, path: Path, name: str, out: Path) -> np.ndarray:
    minfer.run("dump-tensor", path, name, "--out", out)
    return np.fromfile(out, dtype="<f4")


def test_random_blocks_dequantize_exactly_as_gguf_py(minfer, tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "blocks.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    blocks = {}
    for qtype in SUPPORTED:
        cols = 768 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else 576
        blocks[qtype] = random_blocks(rng, qtype, 5, cols)
        writer.add_tensor(qtype.name, blocks[qtype], raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for qtype, raw in blocks.items():
        want = gguf.quants.dequantize(raw, qtype).reshape(-1)
        got = dump(minfer, path, qtype.name, tmp_path / f"{qtype.name}.f32")
        assert got.shape == want.shape, qtype.name
        mismatch = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        assert mismatch.size == 0, (f"{qtype.name}: {mismatch.size} of {want.size} values differ from gguf-py, first at "
                                    f"{mismatch[0]}: {got[mismatch[0]]} vs {want[mismatch[0]]}")


def real_tensors(path: Path, max_values: int = 3_000_000):
    """Per quantized type in the file, its smallest tensor and one more if small enough."""
    reader = gguf.GGUFReader(path)
    by_type = {}
    for t in reader.tensors:
        if t.tensor_type in SUPPORTED:
            by_type.setdefault(t.tensor_type, []).append(t)
    picked = []
    for qtype, tensors in by_type.items():
        tensors.sort(key=lambda t: int(t.n_elements))
        picked += [t for t in tensors[:2] if int(t.n_elements) <= max_values] or tensors[:1]
    return picked


@pytest.mark.parametrize("model", ["smollm2_gguf", "gemma3_gguf"])
def test_real_tensors_dequantize_exactly_as_gguf_py(minfer, model, request, tmp_path):
    path = request.getfixturevalue(model)
    seen = set()
    for t in real_tensors(path):
        want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
        got = dump(minfer, path, t.name, tmp_path / "t.f32")
        assert got.shape == want.shape, t.name
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (
            f"{t.name} ({t.tensor_type.name}): {int((got != want).sum())} values differ from gguf-py")
        seen.add(t.tensor_type.name)
    print(f"{path.name}: types checked {sorted(seen)}")
    assert seen, "no quantized tensor found"


def test_unsupported_type_is_refused_naming_file_tensor_and_type(minfer, tmp_path):
    path = tmp_path / "iq2.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    block, size = gguf.GGML_QUANT_SIZES[T.IQ2_XXS]
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 256 // block * size), dtype=np.uint8), raw_dtype=T.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    proc = minfer.run("dump-tensor", path, "blk.0.attn_q.weight", "--out", tmp_path / "x.f32", check=False)
    assert proc.returncode != 0
    assert str(path) in proc.stderr and "blk.0.attn_q.weight" in proc.stderr and "IQ2_XXS" in proc.stderr, proc.stderr
