// Resampling as PIL's Image.resize does it, to the bit: the Hugging Face image processors resize with PIL, so a
// model sees PIL's pixels, and ours must be the same ones. PIL separates the filter into a horizontal then a vertical
// pass with 22-bit fixed-point weights, rounding to 8 bits after each pass; this is that algorithm (Pillow's
// Resample.c), not a library call, because no C++ library reproduces PIL's rounding and every other resampler
// (OpenCV, libvips, torchvision) differs from it by a grey level or more on some pixels.
#pragma once

#include <cstdint>

#include "media/image.h"

namespace minfer::media {

// PIL's Image.Resampling numbers (the `resample` of a preprocessor_config.json).
enum class Resample : uint8_t { kNearest = 0, kLanczos = 1, kBilinear = 2, kBicubic = 3, kBox = 4, kHamming = 5 };
const char* resample_name(Resample resample);

// PIL's image.resize((width, height), resample). kNearest is PIL's nearest-neighbour sampling of pixel centres.
RgbImage resize_image(const RgbImage& image, int64_t width, int64_t height, Resample resample);

// The part [left, left + width) x [top, top + height), PIL's crop: pixels outside the image are black.
RgbImage crop_image(const RgbImage& image, int64_t left, int64_t top, int64_t width, int64_t height);

}  // namespace minfer::media
