// decode_image: the format from the bytes' signature, then that format's Debian library. Each decoder checks the
// header's size against the pixel limit before it decodes a pixel (a 50-byte PNG may claim 10^10 pixels) and turns
// the library's error into a minfer::Error naming the format and the problem.
#include <gif_lib.h>
#include <png.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "media/image.h"
#include "media/image_decode_gif.h"

namespace minfer::media {
namespace {

void check_size(const char* format, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) fail("image: the {} declares a size of {}x{}", format, width, height);
  if (width * height > max_pixels) {
    fail("image: the {} is {}x{} = {} pixels, more than the {} this server takes (--max-image-pixels)", format, width,
         height, width * height, max_pixels);
  }
}

RgbImage decode_png(std::span<const uint8_t> bytes, int64_t max_pixels) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) fail("image: bad PNG: {}", img.message);
  std::unique_ptr<png_image, void (*)(png_image*)> guard(&img, png_image_free);
  check_size("PNG", img.width, img.height, max_pixels);
  const bool alpha = (img.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  img.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, pixels.data(), 0, nullptr)) fail("image: bad PNG: {}", img.message);
  const int64_t w = img.width, h = img.height;
  if (alpha) return rgba_over_white(pixels.data(), w, h);
  return RgbImage{w, h, std::move(pixels)};
}

RgbImage decode_jpeg(std::span<const uint8_t> bytes, int64_t max_pixels) {
  std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  if (!tj) fail_internal("image: TurboJPEG did not start: {}", tjGetErrorStr2(nullptr));
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  auto* data = const_cast<unsigned char*>(bytes.data());  // TurboJPEG 2's API is not const-correct; it only reads
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(tj.get(), data, size, &w, &h, &subsamp, &colorspace) != 0) {
    fail("image: bad JPEG: {}", tjGetErrorStr2(tj.get()));
  }
  check_size("JPEG", w, h, max_pixels);
  RgbImage out{w, h, std::vector<uint8_t>(static_cast<size_t>(int64_t{w} * h * 3))};
  // Accurate DCT and fancy upsampling: TurboJPEG's defaults and PIL's. A warning (a truncated file) still gives
  // the pixels libjpeg recovered, as PIL's LOAD_TRUNCATED_IMAGES would not: refuse it.
  if (tjDecompress2(tj.get(), data, size, out.rgb.data(), w, 0, h, TJPF_RGB, 0) != 0) {
    fail("image: bad JPEG: {}", tjGetErrorStr2(tj.get()));
  }
  return apply_orientation(std::move(out), exif_orientation(bytes));
}

RgbImage decode_webp(std::span<const uint8_t> bytes, int64_t max_pixels) {
  const WebPData data{bytes.data(), bytes.size()};
  std::unique_ptr<WebPDemuxer, void (*)(WebPDemuxer*)> demux(WebPDemux(&data), WebPDemuxDelete);
  if (!demux) fail("image: bad WebP: the container does not parse");
  const int64_t w = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_WIDTH);
  const int64_t h = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_HEIGHT);
  check_size("WebP", w, h, max_pixels);
  WebPIterator frame;
  if (!WebPDemuxGetFrame(demux.get(), 1, &frame)) fail("image: bad WebP: it has no frame");
  std::unique_ptr<WebPIterator, void (*)(WebPIterator*)> frame_guard(&frame, WebPDemuxReleaseIterator);
  if (frame.x_offset + frame.width > w || frame.y_offset + frame.height > h) {
    fail("image: bad WebP: the first frame lies outside the {}x{} canvas", w, h);
  }
  // The first frame on a transparent canvas (an animation's first frame may cover part of it).
  std::vector<uint8_t> canvas(static_cast<size_t>(w * h * 4), 0);
  const int64_t stride = w * 4;
  uint8_t* at = canvas.data() + frame.y_offset * stride + frame.x_offset * 4;
  if (!WebPDecodeRGBAInto(frame.fragment.bytes, frame.fragment.size, at,
                          canvas.size() - static_cast<size_t>(at - canvas.data()), static_cast<int>(stride))) {
    fail("image: bad WebP: the first frame does not decode");
  }
  RgbImage out = rgba_over_white(canvas.data(), w, h);
  WebPChunkIterator exif;
  if (WebPDemuxGetChunk(demux.get(), "EXIF", 1, &exif)) {
    out = apply_orientation(std::move(out), exif_orientation({exif.chunk.bytes, exif.chunk.size}));
    WebPDemuxReleaseChunkIterator(&exif);
  }
  return out;
}

}  // namespace

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  auto starts = [&](size_t at, const char* magic) {
    const size_t n = std::strlen(magic);
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (starts(0, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (starts(0, "\xff\xd8\xff")) return ImageFormat::kJpeg;
  if (starts(0, "RIFF") && starts(8, "WEBP")) return ImageFormat::kWebp;
  if (starts(0, "GIF87a") || starts(0, "GIF89a")) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

RgbImage decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kPng: return decode_png(bytes, max_pixels);
    case ImageFormat::kJpeg: return decode_jpeg(bytes, max_pixels);
    case ImageFormat::kWebp: return decode_webp(bytes, max_pixels);
    case ImageFormat::kGif: return decode_gif(bytes, max_pixels);
    case ImageFormat::kUnknown: break;
  }
  fail("image: not a PNG, JPEG, WebP or GIF file ({} bytes that start with none of their signatures)", bytes.size());
}

RgbImage rgba_over_white(const uint8_t* rgba, int64_t width, int64_t height) {
  RgbImage out{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  for (int64_t i = 0; i < width * height; ++i) {
    const uint8_t a = rgba[i * 4 + 3];
    for (int c = 0; c < 3; ++c) out.rgb[static_cast<size_t>(i * 3 + c)] = composite_over_white(rgba[i * 4 + c], a);
  }
  return out;
}

uint8_t composite_over_white(uint8_t value, uint8_t alpha) {
  // PIL's ImagingAlphaComposite with an opaque white destination, in its fixed point (7 fraction bits, / 255 by
  // shifts), so the result is PIL's to the bit.
  if (alpha == 0) return 255;
  constexpr uint32_t kPrecision = 7;
  const uint32_t out_a255 = alpha * 255u + 255u * (255u - alpha);
  const uint32_t coef1 = alpha * 255u * 255u * (1u << kPrecision) / out_a255;
  const uint32_t coef2 = 255u * (1u << kPrecision) - coef1;
  const uint32_t tmp = value * coef1 + 255u * coef2 + (0x80u << kPrecision);
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kPrecision);
}

}  // namespace minfer::media
