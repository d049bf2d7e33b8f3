// The GIF decoder of decode_image (media/image.h): the first frame only, on giflib's record API, so the frames after
// it are never read (DGifSlurp would allocate every one of them).
#pragma once

#include <cstdint>
#include <span>

#include "media/image.h"

namespace minfer::media {

RgbImage decode_gif(std::span<const uint8_t> bytes, int64_t max_pixels);

}  // namespace minfer::media
