"""Qwen3.5's multi-token-prediction layers are loaded and checked (mtp.layers.0.*, mtp.fc and its norms, as the
checkpoints ship them and config.json's mtp_num_hidden_layers declares them), for the speculative issue that will
run them: a checkpoint with them computes exactly what one without does, a missing or misshapen MTP tensor is refused
naming it, and undeclared ones are skipped as before; likewise llama.cpp's nextn block in a GGUF file."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest

from conftest import REFERENCE_DIR, ids_arg  # noqa: F401 (puts tests/reference on sys.path)

PROMPT_IDS = list(range(5, 45))
DTYPES = {"F32": np.float32}


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {name: np.frombuffer(data[info["data_offsets"][0]:info["data_offsets"][1]],
                                dtype=DTYPES[info["dtype"]]).reshape(info["shape"]) for name, info in header.items()}


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype=np.float32).tobytes())


def with_mtp(src, dst, drop=None, reshape=None):
    """A copy of the tiny Qwen3.5 with an MTP block: its attention layer's weights as mtp.layers.0.*, a random fc and
    norms (transformers' names)."""
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 1
    (dst / "config.json").write_text(json.dumps(config))
    tensors = read_safetensors(dst / "model.safetensors")
    hidden = config["text_config"]["hidden_size"]
    layer = "model.language_model.layers.3."  # tiny-qwen3.5's attention layer
    rng = np.random.default_rng(3)
    for name, t in list(tensors.items()):
        if name.startswith(layer):
            tensors["mtp.layers.0." + name[len(layer):]] = t
    tensors["mtp.fc.weight"] = rng.normal(0, 0.1, (hidden, 2 * hidden)).astype(np.float32)
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        tensors[f"mtp.{norm}.weight"] = rng.normal(0, 0.1, (hidden,)).astype(np.float32)
    if drop:
        del tensors[drop]
    if reshape:
        tensors[reshape] = tensors[reshape][:-1]
    write_safetensors(dst / "model.safetensors", tensors)
    return dst


def logits(minfer, model, tmp_path):
    out = tmp_path / "logits.f32"
    minfer.run("generate", "--model", model, "--prompt-ids", ids_arg(PROMPT_IDS), "-n", 1, "--temperature", 0,
               "--dump-prompt-logits", out)
    return np.fromfile(out, dtype="<f4")


def test_mtp_block_is_loaded_and_changes_nothing(minfer, tiny_models, tmp_path):
    plain = tiny_models("tiny-qwen3.5", "f32")
    mtp = with_mtp(plain, tmp_path / "mtp")
    assert np.array_equal(logits(minfer, mtp, tmp_path), logits(minfer, plain, tmp_path))
    # The same tensors with the block undeclared: skipped as the vision tower is.
    config = json.loads((mtp / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 0
    (mtp / "config.json").write_text(json.dumps(config))
    proc = minfer.run("generate", "--model", mtp, "--prompt-ids", "1 2 3", "-n", 1)
    assert "undeclared MTP layers skipped" in proc.stderr


def test_missing_or_misshapen_mtp_tensor_is_refused(minfer, tiny_models, tmp_path):
    plain = tiny_models("tiny-qwen3.5", "f32")
    for case, kwargs, message in [
            ("missing", {"drop": "mtp.pre_fc_norm_hidden.weight"}, "missing tensor 'mtp.pre_fc_norm_hidden.weight'"),
            ("misshapen", {"reshape": "mtp.fc.weight"}, "'mtp.fc.weight'")]:
        model = with_mtp(plain, tmp_path / case, **kwargs)
        proc = minfer.run("generate", "--model", model, "--prompt-ids", "1 2 3", "-n", 1, check=False)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]


def test_gguf_nextn_block_is_loaded_and_changes_nothing(minfer, tiny_models, tmp_path, monkeypatch):
    """The same block in llama.cpp's layout: blk.{trunk}.* with nextn.eh_proj / enorm / hnorm / shared_head_norm,
    block_count counting it and nextn_predict_layers = 1."""
    gguf = pytest.importorskip("gguf", reason="gguf is in the project venv (scripts/setup-venv.sh)")
    gguf_py_writer = pytest.importorskip("gguf_py_writer")
    plain = tiny_models("tiny-qwen3.5", "f32")
    hidden = json.loads((plain / "config.json").read_text())["text_config"]["hidden_size"]
    write_tensors = gguf_py_writer.write_tensors
    rng = np.random.default_rng(4)

    def with_nextn(w, arch, cfg, tensors, *rest):
        extra = {"blk.4." + k[len("blk.3."):]: v for k, v in tensors.items() if k.startswith("blk.3.")}
        extra["blk.4.nextn.eh_proj.weight"] = lambda: rng.normal(0, 0.1, (hidden, 2 * hidden)).astype(np.float32)
        for norm in ("enorm", "hnorm", "shared_head_norm"):
            extra[f"blk.4.nextn.{norm}.weight"] = lambda: np.ones(hidden, np.float32)
        w.add_uint32(f"{arch}.nextn_predict_layers", 1)
        write_tensors(w, arch, cfg, {**tensors, **extra}, *rest)

    gguf_py_writer.write(str(plain), str(tmp_path / "plain.gguf"))
    add_block_count = gguf.GGUFWriter.add_block_count
    monkeypatch.setattr(gguf.GGUFWriter, "add_block_count", lambda self, n: add_block_count(self, n + 1))
    monkeypatch.setattr(gguf_py_writer, "write_tensors", with_nextn)
    gguf_py_writer.write(str(plain), str(tmp_path / "mtp.gguf"))
    assert np.array_equal(logits(minfer, tmp_path / "mtp.gguf", tmp_path), logits(minfer, tmp_path / "plain.gguf",
                                                                                   tmp_path))
