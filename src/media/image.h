// Images a request carries, decoded to 8-bit RGB as the Hugging Face processors see them: PIL's image after
// transformers' load_image (EXIF orientation applied) and convert_to_rgb (alpha composited over white).
// Decoding is Debian's libraries' (libpng, libjpeg-turbo, libwebp, giflib; libexif for the orientation), never a
// decoder of our own: media/image_decode.cpp only sniffs the format and calls them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace minfer::media {

// Row-major interleaved RGB, 3 bytes a pixel.
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;

  uint8_t at(int64_t x, int64_t y, int c) const { return rgb[static_cast<size_t>((y * width + x) * 3 + c)]; }
};

enum class ImageFormat : uint8_t { kUnknown, kPng, kJpeg, kWebp, kGif };
const char* image_format_name(ImageFormat format);
// The format the bytes' signature says (kUnknown when none matches).
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// Decodes a PNG, JPEG, WebP or GIF (its first frame) to RGB, EXIF orientation applied and alpha composited over
// white. Images of more than max_pixels pixels are refused from their header, before any pixel is decoded. Throws
// minfer::Error (kInvalidArgument) saying what is wrong: an unknown format, a file that does not decode, too many
// pixels.
RgbImage decode_image(std::span<const uint8_t> bytes, int64_t max_pixels);

// PIL's Image.alpha_composite of a pixel over opaque white, then the alpha dropped (transformers' convert_to_rgb);
// rgba_over_white does it to every pixel of interleaved RGBA rows.
uint8_t composite_over_white(uint8_t value, uint8_t alpha);
RgbImage rgba_over_white(const uint8_t* rgba, int64_t width, int64_t height);

// EXIF orientation (1..8; 1 = as stored) applied as PIL.ImageOps.exif_transpose does.
RgbImage apply_orientation(RgbImage image, int orientation);

// The orientation in an EXIF block (a JPEG's APP1 payload starting "Exif\0\0", or a bare TIFF header as PNG's
// eXIf and WebP's EXIF chunks hold it); 1 when absent or unreadable.
int exif_orientation(std::span<const uint8_t> exif);

}  // namespace minfer::media
