// Request images (media/): PNG round trips through libpng's writer, alpha over white, the resize's invariants, EXIF
// orientations, Qwen's smart_resize, and bad or oversized files refused with an Error (never a crash; this runs
// under ASan/UBSan). Exactness against Pillow is tests/python/test_images.py's.
#include <gtest/gtest.h>
#include <png.h>

#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "media/image.h"
#include "media/image_processor.h"
#include "media/image_resize.h"

namespace minfer::media {
namespace {

std::vector<uint8_t> encode_png(const std::vector<uint8_t>& pixels, int64_t w, int64_t h, bool alpha) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(MediaImage, PngRoundTripsWithAlphaOverWhite) {
  std::mt19937 rng(1);
  const int64_t w = 37, h = 11;
  const auto rgb = random_bytes(rng, static_cast<size_t>(w * h * 3));
  const RgbImage plain = decode_image(encode_png(rgb, w, h, false), 1 << 20);
  EXPECT_EQ(plain.width, w);
  EXPECT_EQ(plain.height, h);
  EXPECT_EQ(plain.rgb, rgb);
  auto rgba = random_bytes(rng, static_cast<size_t>(w * h * 4));
  rgba[3] = 0, rgba[7] = 255;
  const RgbImage over = decode_image(encode_png(rgba, w, h, true), 1 << 20);
  for (int64_t i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(over.rgb[static_cast<size_t>(i * 3 + c)],
                composite_over_white(rgba[static_cast<size_t>(i * 4 + c)], rgba[static_cast<size_t>(i * 4 + 3)]));
  EXPECT_EQ(over.at(0, 0, 0), 255);      // transparent: white
  EXPECT_EQ(over.at(1, 0, 2), rgba[6]);  // opaque: itself
  for (int a = 0; a < 256; a += 17) EXPECT_EQ(composite_over_white(255, static_cast<uint8_t>(a)), 255) << a;
}

TEST(MediaImage, ResizeInvariants) {
  std::mt19937 rng(2);
  RgbImage flat{23, 17, std::vector<uint8_t>(23 * 17 * 3)};
  for (int64_t i = 0; i < 23 * 17; ++i)
    flat.rgb[static_cast<size_t>(i * 3)] = 200, flat.rgb[static_cast<size_t>(i * 3 + 1)] = 7;
  for (Resample r : {Resample::kNearest, Resample::kLanczos, Resample::kBilinear, Resample::kBicubic, Resample::kBox,
                     Resample::kHamming}) {
    for (auto [w, h] : {std::pair<int64_t, int64_t>{5, 3}, {64, 1}, {1, 40}, {23, 50}}) {
      const RgbImage out = resize_image(flat, w, h, r);
      ASSERT_EQ(out.width, w);
      ASSERT_EQ(out.height, h);
      for (int64_t i = 0; i < w * h; ++i)
        ASSERT_TRUE(out.rgb[static_cast<size_t>(i * 3)] == 200 && out.rgb[static_cast<size_t>(i * 3 + 1)] == 7 &&
                    out.rgb[static_cast<size_t>(i * 3 + 2)] == 0)
            << resample_name(r) << " " << w << "x" << h;
    }
  }
  RgbImage noise{9, 4, random_bytes(rng, 9 * 4 * 3)};
  EXPECT_EQ(resize_image(noise, 9, 4, Resample::kBicubic).rgb, noise.rgb);
  EXPECT_EQ(crop_image(noise, 0, 0, 9, 4).rgb, noise.rgb);
  const RgbImage padded = crop_image(noise, -1, 2, 3, 3);
  EXPECT_EQ(padded.at(0, 0, 0), 0);
  EXPECT_EQ(padded.at(1, 0, 1), noise.at(0, 2, 1));
}

TEST(MediaImage, OrientationsComposeAsTransposes) {
  std::mt19937 rng(3);
  const RgbImage img{5, 3, random_bytes(rng, 5 * 3 * 3)};
  for (int o = 1; o <= 8; ++o) {
    const RgbImage t = apply_orientation(img, o);
    EXPECT_EQ(t.width, o >= 5 ? 3 : 5) << o;
  }
  EXPECT_EQ(apply_orientation(apply_orientation(img, 6), 8).rgb, img.rgb);  // clockwise then counter-clockwise
  EXPECT_EQ(apply_orientation(apply_orientation(img, 2), 2).rgb, img.rgb);
  EXPECT_EQ(apply_orientation(apply_orientation(img, 5), 5).rgb, img.rgb);
  EXPECT_EQ(apply_orientation(img, 6).at(0, 0, 0), img.at(0, 2, 0));  // rotated clockwise: bottom-left comes first
  EXPECT_EQ(exif_orientation({}), 1);
}

TEST(MediaImage, SmartResizeAsQwen) {
  // Values from Qwen2-VL's image processor (Python) for its default factor 28 and a 200704-pixel budget.
  const std::tuple<int64_t, int64_t, int64_t, int64_t> cases[] = {
      {600, 512, 476, 392}, {768, 1024, 364, 504}, {41, 50, 56, 84}, {90, 3000, 56, 2576}, {42, 70, 56, 56}};
  for (auto [h, w, want_h, want_w] : cases) {
    EXPECT_EQ(smart_resize(h, w, 28, 3136, 200704), std::make_pair(want_h, want_w)) << h << "x" << w;
  }
  EXPECT_THROW(smart_resize(10, 3000, 28, 3136, 200704), Error);
}

TEST(MediaImage, BadAndOversizedFilesAreRefused) {
  std::mt19937 rng(4);
  const int64_t w = 40, h = 30;
  const auto png = encode_png(random_bytes(rng, static_cast<size_t>(w * h * 3)), w, h, false);
  EXPECT_THROW(decode_image(png, w * h - 1), Error);
  for (size_t cut : {size_t{0}, size_t{4}, size_t{8}, size_t{20}, size_t{33}, png.size() / 2, png.size() - 16}) {
    const std::vector<uint8_t> part(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(decode_image(part, 1 << 20), Error) << "cut at " << cut;
  }
  for (const char* junk : {"GIF89a", "RIFF\x10\0\0\0WEBPVP8 ", "\xff\xd8\xff\xe0\0\x10JFIF", "not an image"}) {
    const std::string s(junk);
    EXPECT_THROW(decode_image({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, 1 << 20), Error) << junk;
  }
  EXPECT_THROW(ImageProcessorConfig::from_json(nlohmann::json::parse(R"({"size": {"height": -3, "width": 4}})")),
               Error);
}

}  // namespace
}  // namespace minfer::media
