"""Vision towers against the PyTorch reference (tests/reference/vision_reference.py, written from Hugging Face's
modelling code): a tiny random Gemma3ForConditionalGeneration's image embeddings for real photos of several sizes,
preprocessed by Pillow as Gemma3ImageProcessor does."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minfer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from vision_reference import SiglipGemma3Reference, make_tiny_gemma3_vision  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))

Image = pytest.importorskip("PIL.Image")
PHOTO = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


@pytest.fixture(scope="module")
def gemma3_vision_dir(tmp_path_factory, minfer_bin) -> Path:
    root = tmp_path_factory.mktemp("gemma3_vision")
    text = root / "text"
    subprocess.run([str(minfer_bin), "make-test-model", "--preset", "tiny-gemma3", "--out", str(text), "--quiet"],
                   check=True)
    out = root / "model"
    make_tiny_gemma3_vision(str(text), str(out))
    return out


def photos() -> list:
    img = Image.open(PHOTO).convert("RGB")
    out = []
    for size in [(512, 600), (97, 61), (32, 32)]:
        buf = io.BytesIO()
        img.resize(size, Image.BICUBIC).save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def pillow_pixels(data: bytes) -> np.ndarray:
    """Gemma3ImageProcessor on PIL: bilinear to 32 x 32, / 255, (x - 0.5) / 0.5, channels first."""
    img = Image.open(io.BytesIO(data)).convert("RGB").resize((32, 32), Image.BILINEAR)
    x = np.asarray(img).astype(np.float64) / 255
    return ((x.astype(np.float32) - 0.5) / 0.5).transpose(2, 0, 1)


def test_gemma3_image_embeddings_match_reference(gemma3_vision_dir):
    images = photos()
    ours = minfer._minfer.encode_images(str(gemma3_vision_dir), images, 10**8)
    want = SiglipGemma3Reference(str(gemma3_vision_dir)).embeddings(np.stack([pillow_pixels(d) for d in images]))
    assert ours.shape == want.shape == (3, 16, 64)
    rel = np.abs(ours - want).max() / np.abs(want).max()
    print("relative error", rel, "scale", np.abs(want).max())
    assert rel < 1e-4, rel
    # Each image alone gives its rows of the batch.
    alone = minfer._minfer.encode_images(str(gemma3_vision_dir), images[1:2], 10**8)
    assert np.abs(alone[0] - ours[1]).max() <= 1e-5 * np.abs(ours[1]).max()


from vision_reference import BOI, EOI, IMAGE_TOKEN  # noqa: E402  (make_tiny_gemma3_vision's ids)


def expanded_prompt(ids, wrap, n_images_tokens=16):
    """Gemma3Processor's expansion of each <start_of_image> (here id BOI), in token space; the image spans."""
    out, spans = [], []
    for t in ids:
        if t != BOI:
            out.append(t)
            continue
        out += wrap + [BOI]
        spans.append((len(out), len(out) + n_images_tokens))
        out += [IMAGE_TOKEN] * n_images_tokens + [EOI] + wrap
    return out, spans


def reference_inputs(model_dir, images, ids, wrap):
    emb = SiglipGemma3Reference(str(model_dir)).embeddings(np.stack([pillow_pixels(d) for d in images]))
    full, spans = expanded_prompt(ids, wrap)
    embeds = {p: emb[i][p - s] for i, (s, e) in enumerate(spans) for p in range(s, e)}
    return full, spans, embeds


def test_gemma3_prompt_with_images_matches_reference(gemma3_vision_dir, minfer_bin, tmp_path):
    """Teacher-forced logits of a prompt with two images (each image's tokens seeing each other, the rest causal),
    and 32 greedy tokens, against the f32 reference fed the reference tower's embeddings."""
    import hf_reference
    from pyapi_support import ENGINE_ARGS

    images = photos()[:2]
    ids = [2, 10, 11, BOI, 12, 13, 14, BOI, 15]
    with minfer.Engine(model_path=str(gemma3_vision_dir), **ENGINE_ARGS) as engine:
        wrap = engine.tokenizer.encode("\n\n", add_special_tokens=False)
        result = engine.generate({"prompt_token_ids": ids, "multi_modal_data": {"image": images}},
                                 max_new_tokens=32, temperature=0, ignore_eos=True)
        # The same image again: its pages come from the prefix cache (content-keyed tokens), the result is the same.
        again = engine.generate({"prompt_token_ids": ids, "multi_modal_data": {"image": images}},
                                max_new_tokens=32, temperature=0, ignore_eos=True)
        # Another image in the second place shares only the pages before it.
        other = engine.generate({"prompt_token_ids": ids, "multi_modal_data": {"image": [images[0], photos()[2]]}},
                                max_new_tokens=32, temperature=0, ignore_eos=True)
    full, spans, embeds = reference_inputs(gemma3_vision_dir, images, ids, wrap)
    ref = hf_reference.Reference.from_dir(str(gemma3_vision_dir.parent / "text"))
    ref.reset()
    want_logits = ref.forward(full, embeds, spans).numpy()
    greedy, logits = [], torch_argmax_last(want_logits)
    while len(greedy) < 32:
        greedy.append(logits)
        logits = torch_argmax_last(ref.forward([logits]).numpy())
    assert result.token_ids == greedy
    assert again.token_ids == greedy and again.cached_tokens > 0
    assert other.cached_tokens < spans[1][0]

    # Teacher-forced, through the command line (--image, --dump-prompt-logits).
    files = []
    for i, data in enumerate(images):
        files += ["--image", str(tmp_path / f"{i}.png")]
        (tmp_path / f"{i}.png").write_bytes(data)
    dump = tmp_path / "logits.f32"
    subprocess.run([str(minfer_bin), "generate", "--model", str(gemma3_vision_dir), "--prompt-ids",
                    " ".join(map(str, ids)), "-n", "1", "--temperature", "0", "--dump-prompt-logits", str(dump),
                    *files], check=True, capture_output=True)
    ours = np.fromfile(dump, dtype="<f4").reshape(len(full), -1)
    scale = np.abs(want_logits).max()
    err = np.abs(ours - want_logits).max() / scale
    print("prompt logits: max error", err, "of", scale)
    assert err < 1e-4
    # The image tokens' bidirectional attention matters here: causal attention over them gives other logits.
    ref.reset()
    causal = ref.forward(full, embeds).numpy()
    assert np.abs(causal - want_logits).max() / scale > 1e-2


def torch_argmax_last(logits: np.ndarray) -> int:
    return int(np.argmax(logits[-1]))


def test_images_refused_with_a_clear_error(gemma3_vision_dir, stories_model):
    from pyapi_support import ENGINE_ARGS

    with minfer.Engine(model_path=str(gemma3_vision_dir), **ENGINE_ARGS) as engine:
        with pytest.raises(minfer.MinferError, match="image placeholders"):
            engine.generate({"prompt_token_ids": [2, 10], "multi_modal_data": {"image": photos()[:1]}})
        with pytest.raises(minfer.MinferError, match="image 0"):
            engine.generate({"prompt_token_ids": [2, BOI], "multi_modal_data": {"image": [b"not an image"]}})
    with minfer.Engine(model_path=stories_model, **ENGINE_ARGS) as engine:
        with pytest.raises(minfer.MinferError, match="takes no images"):
            engine.generate({"prompt_token_ids": [1, 2], "multi_modal_data": {"image": photos()[:1]}})


def test_gemma3_images_batched_and_chunked_equal_alone(gemma3_vision_dir):
    """Several requests with images in one batch, and prefills chunked smaller than an image (the image is never split:
    its tokens see each other), give each request's tokens alone."""
    from pyapi_support import ENGINE_ARGS

    pics = photos()
    prompts = [{"prompt_token_ids": [2, 10, BOI, 11], "multi_modal_data": {"image": pics[0]}},
               {"prompt_token_ids": [2, 12, 13, BOI, 14, BOI], "multi_modal_data": {"image": [pics[1], pics[2]]}},
               {"prompt_token_ids": [2, BOI, 15, 16, 17], "multi_modal_data": {"image": [pics[2]]}}]
    greedy = dict(max_new_tokens=12, temperature=0, ignore_eos=True)
    with minfer.Engine(model_path=str(gemma3_vision_dir), **ENGINE_ARGS) as engine:
        alone = [engine.generate(p, **greedy).token_ids for p in prompts]
    args = dict(ENGINE_ARGS, max_num_batched_tokens=10, enable_prefix_caching=False)
    with minfer.Engine(model_path=str(gemma3_vision_dir), **args) as engine:
        batched = [r.token_ids for r in engine.generate(prompts, **greedy)]
    assert batched == alone
    # An encoder budget of one image a step: the four images are encoded over several steps, the tokens the same.
    with minfer.Engine(model_path=str(gemma3_vision_dir), max_num_encoder_tokens=16, **ENGINE_ARGS) as engine:
        assert [r.token_ids for r in engine.generate(prompts, **greedy)] == alone
