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
