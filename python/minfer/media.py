"""What the engine does to a request's image, as functions: decode (PNG, JPEG, WebP, GIF's first frame; EXIF
orientation applied, alpha over white) and a model processor's preprocessing (resize as PIL does, rescale,
normalise), for checking inputs against Hugging Face's processors.

    import minfer, json
    rgb = minfer.decode_image(open("photo.jpg", "rb").read())            # uint8 [height, width, 3]
    px = minfer.preprocess_image(open("photo.jpg", "rb").read(),
                                 json.load(open("preprocessor_config.json")))  # float32 [3, H, W]
"""

import json
from typing import Union

from ._minfer_loader import _minfer

# PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS); the server's --max-image-pixels default.
DEFAULT_MAX_IMAGE_PIXELS = 89_478_485


def decode_image(data: bytes, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
    """The image's pixels, uint8 [height, width, 3]. Raises MinferError on a file that does not decode."""
    return _minfer.decode_image(bytes(data), int(max_pixels))


def preprocess_image(data: bytes, processor: Union[dict, str], max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
    """pixel_values of one image, float32 [3, H, W], per a preprocessor_config.json (a dict or its text)."""
    text = processor if isinstance(processor, str) else json.dumps(processor)
    return _minfer.preprocess_image(bytes(data), text, int(max_pixels))
