"""Request images against Pillow, the library Hugging Face's processors resize with: decoding (every format, EXIF
orientation, alpha over white), PIL's resampling to the bit, and each processor kind's pixel_values within 1/255.

The photo is a real one from a Debian package (matplotlib's sample data); the variants of it are made here with
Pillow from PyPI (scripts/requirements.txt)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

import minfer

PIL = pytest.importorskip("PIL")
from PIL import Image, ImageOps  # noqa: E402

PHOTO = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    if not PHOTO.exists():
        pytest.fail(f"missing {PHOTO} (Debian's python3-matplotlib, scripts/install-deps.sh)")
    return Image.open(PHOTO).convert("RGB")


def encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def pil_rgb(data: bytes) -> np.ndarray:
    """transformers' load_image + convert_to_rgb: EXIF transpose, then alpha composited over white."""
    img = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    if img.mode != "RGB":
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255))
        img = Image.alpha_composite(white, rgba).convert("RGB")
    return np.asarray(img)


def test_real_jpeg_decodes_as_pil_does():
    data = PHOTO.read_bytes()
    ours = minfer.decode_image(data)
    theirs = pil_rgb(data)
    assert ours.shape == theirs.shape
    # Same library family (libjpeg-turbo, accurate DCT, fancy upsampling): identical but for the odd rounding
    # difference between Debian's release and the one in Pillow's wheel.
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


@pytest.mark.parametrize("fmt,kw", [("PNG", {}), ("WEBP", {"lossless": True}), ("GIF", {}), ("JPEG", {"quality": 90})])
@pytest.mark.parametrize("size", [(97, 61), (512, 600), (1, 1)])
def test_formats_and_sizes(photo, fmt, kw, size):
    img = photo.resize(size)
    if fmt == "GIF":
        img = img.quantize(64)
    data = encode(img, fmt, **kw)
    ours, theirs = minfer.decode_image(data), pil_rgb(data)
    assert ours.shape == theirs.shape
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= (1 if fmt == "JPEG" else 0)


def test_alpha_is_composited_over_white(photo):
    rgba = photo.resize((80, 50)).convert("RGBA")
    alpha = np.tile(np.arange(80, dtype=np.uint8) * 3, (50, 1))
    rgba.putalpha(Image.fromarray(alpha))
    for data in (encode(rgba, "PNG"), encode(rgba, "WEBP", lossless=True)):
        assert np.array_equal(minfer.decode_image(data), pil_rgb(data))
    gif = photo.resize((40, 30)).quantize(16)
    data = encode(gif, "GIF", transparency=3)
    assert np.array_equal(minfer.decode_image(data), pil_rgb(data))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation(photo, orientation):
    img = photo.resize((64, 40))
    exif = Image.Exif()
    exif[0x0112] = orientation
    for fmt in ("JPEG", "WEBP"):
        data = encode(img, fmt, exif=exif.tobytes(), **({"quality": 95} if fmt == "JPEG" else {"lossless": True}))
        ours, theirs = minfer.decode_image(data), pil_rgb(data)
        assert ours.shape == theirs.shape, (fmt, orientation)
        assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1, (fmt, orientation)


@pytest.mark.parametrize("bad", [b"", b"hello", b"\x89PNG\r\n\x1a\n" + b"\0" * 40, b"\xff\xd8\xff\xe0" + b"\0" * 64,
                                 b"RIFF\0\0\0\0WEBPVP8 ", b"GIF89a\x01\x00"])
def test_bad_files_are_refused(bad):
    with pytest.raises(minfer.MinferError, match="image"):
        minfer.decode_image(bad)


def test_pixel_limit_is_checked_before_decoding(photo):
    data = encode(photo, "PNG")
    with pytest.raises(minfer.MinferError, match="max-image-pixels"):
        minfer.decode_image(data, max_pixels=512 * 600 - 1)
    assert minfer.decode_image(data, max_pixels=512 * 600).shape == (600, 512, 3)


FILTERS = {0: Image.NEAREST, 1: Image.LANCZOS, 2: Image.BILINEAR, 3: Image.BICUBIC, 4: Image.BOX, 5: Image.HAMMING}


def processed(data: bytes, config: dict) -> np.ndarray:
    return minfer.preprocess_image(data, config)


def hf_normalise(img: Image.Image, config: dict) -> np.ndarray:
    x = np.asarray(img).astype(np.float64) * config.get("rescale_factor", 1 / 255)
    x = (x.astype(np.float32) - np.array(config["image_mean"], np.float32)) / np.array(config["image_std"], np.float32)
    return x.transpose(2, 0, 1)


@pytest.mark.parametrize("resample", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("out", [(896, 896), (224, 224), (37, 611), (1023, 5)])
def test_resize_is_pils_to_the_bit(photo, resample, out):
    config = {"size": {"height": out[1], "width": out[0]}, "resample": resample, "do_normalize": False,
              "do_rescale": False, "image_mean": [0, 0, 0], "image_std": [1, 1, 1]}
    ours = processed(encode(photo, "PNG"), config)
    theirs = np.asarray(photo.resize(out, FILTERS[resample])).astype(np.float32).transpose(2, 0, 1)
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)


def test_gemma3_processor(photo):
    config = {"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 896, "width": 896}, "resample": 2,
              "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3,
              "image_std": [0.5] * 3}
    for size in [(512, 600), (1500, 333), (96, 96)]:
        img = photo.resize(size, Image.BICUBIC)
        data = encode(img, "PNG")
        ours = processed(data, config)
        theirs = hf_normalise(img.resize((896, 896), Image.BILINEAR), config)
        assert ours.shape == (3, 896, 896)
        assert np.abs(ours - theirs).max() <= 1 / 255 * 2  # mean/std 0.5: one grey level is 2/255


def test_clip_processor(photo):
    config = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 336}, "do_center_crop": True,
              "crop_size": {"height": 336, "width": 336}, "resample": 3, "rescale_factor": 1 / 255,
              "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
    for size in [(512, 600), (1000, 401)]:
        img = photo.resize(size, Image.BICUBIC)
        w, h = size
        short, long_ = min(w, h), max(w, h)
        new = (int(336 * long_ / short), 336) if w >= h else (336, int(336 * long_ / short))
        resized = img.resize(new, Image.BICUBIC)
        left, top = (new[0] - 336) // 2, (new[1] - 336) // 2
        theirs = hf_normalise(resized.crop((left, top, left + 336, top + 336)), config)
        ours = processed(encode(img, "PNG"), config)
        assert ours.shape == theirs.shape
        assert np.abs(ours - theirs).max() < 1e-5


def smart_resize(height, width, factor, min_pixels, max_pixels):  # Qwen2-VL's, from its image processor
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def test_qwen_smart_resize_processor(photo):
    config = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136, "max_pixels": 200704,
              "patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "resample": 3,
              "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
    for size in [(512, 600), (1024, 768), (50, 41), (3000, 90)]:
        img = photo.resize(size, Image.BICUBIC)
        h, w = smart_resize(size[1], size[0], 28, 3136, 200704)
        theirs = hf_normalise(img.resize((w, h), Image.BICUBIC), config)
        ours = processed(encode(img, "PNG"), config)
        assert ours.shape == (3, h, w), size
        assert np.abs(ours - theirs).max() < 1e-5
