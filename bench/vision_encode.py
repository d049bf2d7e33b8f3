#!/usr/bin/env python3
"""Encoding one image on Gemma 3's SigLIP shape (27 layers, hidden 1152, 896 x 896 in 14-pixel patches: 4096 patches,
pooled to 256 tokens), minfer against llama.cpp's mtmd on the same projector file, alternated. The file is a random
projector written by gguf-py as llama.cpp's converter writes Gemma 3's (f16 matrices, f32 embeddings and norms);
the language model behind it is tiny (the projection maps to its width), since only the tower is timed. minfer's
time is the encoder's run (tests/python's encode_images binding, repeats); llama.cpp's is mtmd_encode_chunk's, each
after one untimed run. GFLOP/s counts the tower's multiply-adds twice (the projections, the MLP, QK^T and PV).
  PYTHONPATH=build/release/python .venv/bin/python bench/vision_encode.py [--layers 27] [--rounds 2] [--threads 2]
"""

import argparse
import ctypes
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gguf
import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "reference"))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
import minfer  # noqa: E402
from vision_reference import rename_special_tokens  # noqa: E402

H, FF, HEADS, PATCH, SIZE = 1152, 4304, 16, 14, 896


def write_mmproj(path: Path, layers: int, text_hidden: int) -> None:
    rng = np.random.default_rng(0)

    def rand(*shape, std, dtype=np.float16):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(dtype)

    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(text_hidden)
    for add, v in [(w.add_vision_image_size, SIZE), (w.add_vision_patch_size, PATCH), (w.add_vision_embedding_length, H),
                   (w.add_vision_feed_forward_length, FF), (w.add_vision_block_count, layers),
                   (w.add_vision_head_count, HEADS)]:
        add(v)
    w.add_vision_image_mean([0.5] * 3)
    w.add_vision_image_std([0.5] * 3)
    w.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_vision_use_gelu(True)
    w.add_tensor("v.patch_embd.weight", rand(H, 3, PATCH, PATCH, std=0.02, dtype=np.float32))
    w.add_tensor("v.patch_embd.bias", rand(H, std=0.02, dtype=np.float32))
    w.add_tensor("v.position_embd.weight", rand((SIZE // PATCH) ** 2, H, std=0.02, dtype=np.float32))
    for i in range(layers):
        p = f"v.blk.{i}."
        for n in ("ln1", "ln2"):
            w.add_tensor(p + n + ".weight", 1 + rand(H, std=0.02, dtype=np.float32))
            w.add_tensor(p + n + ".bias", rand(H, std=0.02, dtype=np.float32))
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + n + ".weight", rand(H, H, std=H ** -0.5))
            w.add_tensor(p + n + ".bias", rand(H, std=0.02, dtype=np.float32))
        w.add_tensor(p + "ffn_up.weight", rand(FF, H, std=H ** -0.5))
        w.add_tensor(p + "ffn_up.bias", rand(FF, std=0.02, dtype=np.float32))
        w.add_tensor(p + "ffn_down.weight", rand(H, FF, std=FF ** -0.5))
        w.add_tensor(p + "ffn_down.bias", rand(H, std=0.02, dtype=np.float32))
    w.add_tensor("v.post_ln.weight", 1 + rand(H, std=0.02, dtype=np.float32))
    w.add_tensor("v.post_ln.bias", rand(H, std=0.02, dtype=np.float32))
    w.add_tensor("mm.soft_emb_norm.weight", 1 + rand(H, std=0.02, dtype=np.float32))
    w.add_tensor("mm.input_projection.weight", rand(H, text_hidden, std=H ** -0.5))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tower_flops(layers: int) -> float:
    n = (SIZE // PATCH) ** 2
    per_layer = n * (4 * H * H + 2 * H * FF) + 2 * n * n * H  # projections, MLP, QK^T and PV (multiply-adds)
    return 2.0 * (layers * per_layer + n * 3 * PATCH * PATCH * H)


def llamacpp_seconds(text_gguf: Path, mmproj: Path, img: Image.Image, threads: int) -> float:
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd
    model = llama_cpp.llama_model_load_from_file(str(text_gguf).encode(), llama_cpp.llama_model_default_params())
    params = mtmd.mtmd_context_params_default()
    params.use_gpu, params.n_threads, params.warmup, params.print_timings = False, threads, False, False
    ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), model, params)
    rgb = np.ascontiguousarray(np.asarray(img), dtype=np.uint8)
    bitmap = mtmd.mtmd_bitmap_init(img.width, img.height, rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
    chunks = mtmd.mtmd_input_chunks_init()
    marker = mtmd.mtmd_default_marker()
    text = mtmd.mtmd_input_text(marker, len(marker), False, True)
    assert mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap), 1) == 0
    chunk = next(mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))
                 if mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, i)) ==
                 mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        assert mtmd.mtmd_encode_chunk(ctx, chunk) == 0
        times.append(time.perf_counter() - t0)
    mtmd.mtmd_input_chunks_free(chunks)
    mtmd.mtmd_bitmap_free(bitmap)
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(model)
    return times[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=27)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="also minfer's time by operator")
    args = ap.parse_args()
    minfer_bin = HERE.parent / "build" / "release" / "tools" / "minfer"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([str(minfer_bin), "make-test-model", "--preset", "tiny-gemma3", "--out", str(root / "text"),
                        "--quiet"], check=True)
        rename_special_tokens(str(root / "text" / "tokenizer.json"))
        subprocess.run([sys.executable, str(HERE.parent / "tests" / "reference" / "gguf_py_writer.py"),
                        str(root / "text"), str(root / "text.gguf")], check=True, capture_output=True)
        write_mmproj(root / "mmproj.gguf", args.layers, 64)
        photo = Image.open("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg").convert("RGB")
        img = photo.resize((SIZE, SIZE), Image.BICUBIC)
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        flops = tower_flops(args.layers)
        print(f"Gemma 3 SigLIP shape, {args.layers} layers, one {SIZE}x{SIZE} image: {flops / 1e9:.0f} GFLOP; "
              f"{args.threads} threads; kernels: {minfer._minfer.__doc__ and ''}")
        ours_all, theirs_all = [], []
        for r in range(args.rounds):
            _, secs = minfer._minfer.encode_images(str(root / "text.gguf"), [buf.getvalue()], 10**9, args.threads,
                                                   str(root / "mmproj.gguf"), 2)
            ours = min(secs)
            theirs = llamacpp_seconds(root / "text.gguf", root / "mmproj.gguf", img, args.threads)
            ours_all.append(ours)
            theirs_all.append(theirs)
            print(f"round {r}: minfer {ours:.2f} s ({flops / ours / 1e9:.0f} GFLOP/s), llama.cpp mtmd {theirs:.2f} s "
                  f"({flops / theirs / 1e9:.0f} GFLOP/s), ratio {theirs / ours:.2f}x")
        print(f"best: minfer {min(ours_all):.2f} s, llama.cpp {min(theirs_all):.2f} s, "
              f"ratio {min(theirs_all) / min(ours_all):.2f}x")
        if args.profile:  # minfer's time by operator (one more run with the executor's per-node clocks)
            _, secs, by_op = minfer._minfer.encode_images(str(root / "text.gguf"), [buf.getvalue()], 10**9,
                                                          args.threads, str(root / "mmproj.gguf"), 1, True)
            total = sum(by_op.values())
            for op, t in sorted(by_op.items(), key=lambda kv: -kv[1]):
                print(f"  {op:45s} {t:7.2f} s  {100 * t / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
