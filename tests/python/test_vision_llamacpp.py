"""Gemma 3's vision tower against llama.cpp itself: a tiny random Gemma3ForConditionalGeneration written as llama.cpp
files by gguf-py (the text model by tests/reference/gguf_py_writer.py, the projector as an mmproj by
tests/reference/gguf_py_vision.py, llama.cpp's converter's layout), encoded by llama.cpp's mtmd (llama-cpp-python's
mtmd_cpp, built from the same source as the pinned llama.cpp) and by minfer reading the same two files (--mmproj).
The images are at the tower's size, so neither resizes: both see the same pixels."""

from __future__ import annotations

import ctypes
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minfer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_py_vision import write_gemma3_mmproj  # noqa: E402
from vision_reference import make_tiny_gemma3_vision, rename_special_tokens  # noqa: E402

llama_cpp = pytest.importorskip("llama_cpp")
mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
Image = pytest.importorskip("PIL.Image")
PHOTO = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory, minfer_bin):
    root = tmp_path_factory.mktemp("gemma3_mmproj")
    text = root / "text"
    subprocess.run([str(minfer_bin), "make-test-model", "--preset", "tiny-gemma3", "--out", str(text), "--quiet"],
                   check=True)
    # GGUF has no key for query_pre_attn_scalar (llama.cpp scales by head_dim): the checkpoint says the same.
    config = json.loads((text / "config.json").read_text())
    config["query_pre_attn_scalar"] = config["head_dim"]
    (text / "config.json").write_text(json.dumps(config))
    make_tiny_gemma3_vision(str(text), str(root / "model"))
    rename_special_tokens(str(text / "tokenizer.json"))  # the text GGUF's vocabulary has the image tokens too
    writer = Path(__file__).resolve().parents[1] / "reference" / "gguf_py_writer.py"
    subprocess.run([sys.executable, str(writer), str(text), str(root / "text.gguf")], check=True, capture_output=True)
    write_gemma3_mmproj(str(root / "model"), str(root / "mmproj.gguf"))
    return root / "text.gguf", root / "mmproj.gguf"


def images_32() -> list:
    img = Image.open(PHOTO).convert("RGB")
    return [img.resize((32, 32), Image.BICUBIC), img.crop((100, 100, 132, 132)),
            img.transpose(Image.FLIP_TOP_BOTTOM).resize((32, 32), Image.BILINEAR)]


def llamacpp_embeddings(text_gguf: Path, mmproj: Path, img) -> np.ndarray:
    params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(str(text_gguf).encode(), params)
    assert model, "llama.cpp did not load the text GGUF"
    ctx_params = mtmd.mtmd_context_params_default()
    ctx_params.use_gpu = False
    ctx_params.n_threads = 2
    ctx_params.warmup = False
    ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), model, ctx_params)
    assert ctx, "mtmd did not load the projector"
    try:
        rgb = np.ascontiguousarray(np.asarray(img), dtype=np.uint8)
        bitmap = mtmd.mtmd_bitmap_init(img.width, img.height, rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
        chunks = mtmd.mtmd_input_chunks_init()
        marker = mtmd.mtmd_default_marker()
        text = mtmd.mtmd_input_text(marker, len(marker), False, True)
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        assert mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1) == 0
        image_chunk = None
        for i in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                image_chunk = chunk
        assert image_chunk is not None
        n_tokens = mtmd.mtmd_input_chunk_get_n_tokens(image_chunk)
        assert mtmd.mtmd_encode_chunk(ctx, image_chunk) == 0
        embd = mtmd.mtmd_get_output_embd(ctx)
        out = np.ctypeslib.as_array(embd, shape=(n_tokens * 64,)).reshape(n_tokens, 64).copy()
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
        return out
    finally:
        mtmd.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)


def test_image_embeddings_agree_with_llamacpp_mtmd(gguf_files):
    text_gguf, mmproj = gguf_files
    for img in images_32():
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        ours = minfer._minfer.encode_images(str(text_gguf), [buf.getvalue()], 10**8, 2, str(mmproj))[0]
        theirs = llamacpp_embeddings(text_gguf, mmproj, img)
        assert ours.shape == theirs.shape == (16, 64)
        rel = np.abs(ours - theirs).max() / np.abs(theirs).max()
        print("relative difference to llama.cpp's mtmd:", rel)
        assert rel < 1e-3  # llama.cpp's own GELU, softmax and accumulation order


def test_gguf_with_mmproj_equals_the_hf_checkpoint(gguf_files, minfer_bin, tmp_path):
    """`--mmproj` with the GGUF text model computes what the Hugging Face directory computes: prompt logits over
    a prompt with an image."""
    text_gguf, mmproj = gguf_files
    img = images_32()[0]
    img.save(tmp_path / "a.png")
    prompt = "Look: <start_of_image> then say"
    runs = {}
    for name, model in {"gguf": ["--model", str(text_gguf), "--mmproj", str(mmproj)],
                        "hf": ["--model", str(text_gguf.parent / "model")]}.items():
        dump = tmp_path / f"{name}.f32"
        subprocess.run([str(minfer_bin), "generate", *model, "--prompt", prompt, "--image", str(tmp_path / "a.png"),
                        "-n", "1", "--temperature", "0", "--dump-prompt-logits", str(dump)],
                       check=True, capture_output=True)
        runs[name] = np.fromfile(dump, dtype="<f4")
    assert runs["gguf"].size == runs["hf"].size > 0
    assert np.abs(runs["gguf"] - runs["hf"]).max() <= 1e-4 * np.abs(runs["hf"]).max()


def test_python_engine_takes_mmproj(gguf_files):
    text_gguf, mmproj = gguf_files
    buf = io.BytesIO()
    images_32()[1].save(buf, format="PNG")
    prompt = {"prompt": "Describe <start_of_image>", "multi_modal_data": {"image": buf.getvalue()}}
    with minfer.Engine(model_path=str(text_gguf), mmproj=mmproj, device="cpu", kv_cache_memory="16MiB",
                       max_seq_len=256) as engine:
        assert engine.config["mmproj"] == str(mmproj)
        with_mmproj = engine.generate(prompt, max_new_tokens=8, temperature=0, ignore_eos=True).token_ids
    with minfer.Engine(model_path=str(text_gguf.parent / "model"), device="cpu", kv_cache_memory="16MiB",
                       max_seq_len=256) as engine:
        assert engine.generate(prompt, max_new_tokens=8, temperature=0, ignore_eos=True).token_ids == with_mmproj
    with minfer.Engine(model_path=str(text_gguf), device="cpu", kv_cache_memory="16MiB", max_seq_len=256) as engine:
        with pytest.raises(minfer.MinferError, match="no vision tower"):
            engine.generate(prompt, max_new_tokens=1)
