#include "media/image_resize.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "base/error.h"

namespace minfer::media {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's fixed point for 8-bit images

struct Filter {
  double (*weight)(double);
  double support;
};

double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= std::numbers::pi;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));  // PIL's float constants
}
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}
double lanczos_filter(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::kBox: return {box_filter, 0.5};
    case Resample::kBilinear: return {bilinear_filter, 1.0};
    case Resample::kHamming: return {hamming_filter, 1.0};
    case Resample::kBicubic: return {bicubic_filter, 2.0};
    case Resample::kLanczos: return {lanczos_filter, 3.0};
    case Resample::kNearest: break;
  }
  fail_internal("resize: no filter for {}", resample_name(r));
}

// Each output pixel's source range [first, first + count) and its fixed-point weights (ksize per pixel): PIL's
// precompute_coeffs then normalize_coeffs_8bpc.
struct Coefficients {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
};

Coefficients precompute(int64_t in_size, int64_t out_size, const Filter& filter) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = filter.support * filterscale;
  Coefficients c;
  c.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size * c.ksize), 0);
  std::vector<double> k(static_cast<size_t>(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const int64_t xmin = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t xmax = std::min<int64_t>(in_size, static_cast<int64_t>(center + support + 0.5)) - xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      k[static_cast<size_t>(x)] = filter.weight((static_cast<double>(x + xmin) - center + 0.5) / filterscale);
      ww += k[static_cast<size_t>(x)];
    }
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[static_cast<size_t>(x)] / ww : k[static_cast<size_t>(x)];
      const double fixed = w * (1 << kPrecisionBits);
      c.weights[static_cast<size_t>(xx * c.ksize + x)] = static_cast<int32_t>(w < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    c.first[static_cast<size_t>(xx)] = xmin;
    c.count[static_cast<size_t>(xx)] = xmax;
  }
  return c;
}

uint8_t clip8(int64_t v) {
  if (v >= (int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// One pass along x (step 3: neighbours in a row) or y (step 3 * width: neighbours in a column). The source rows
// [row0, row0 + out.height) of `in` feed the horizontal pass; the vertical pass reads all of `in`.
RgbImage resample_x(const RgbImage& in, int64_t row0, int64_t rows, const Coefficients& c, int64_t out_width) {
  RgbImage out{out_width, rows, std::vector<uint8_t>(static_cast<size_t>(out_width * rows * 3))};
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* src = in.rgb.data() + (row0 + y) * in.width * 3;
    for (int64_t x = 0; x < out_width; ++x) {
      const int32_t* k = c.weights.data() + x * c.ksize;
      const uint8_t* s = src + c.first[static_cast<size_t>(x)] * 3;
      int64_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int64_t i = 0; i < c.count[static_cast<size_t>(x)]; ++i)
        for (int ch = 0; ch < 3; ++ch) acc[ch] += int64_t{s[i * 3 + ch]} * k[i];
      for (int ch = 0; ch < 3; ++ch) out.rgb[static_cast<size_t>((y * out_width + x) * 3 + ch)] = clip8(acc[ch]);
    }
  }
  return out;
}

RgbImage resample_y(const RgbImage& in, int64_t row0, const Coefficients& c, int64_t out_height) {
  const int64_t w = in.width;
  RgbImage out{w, out_height, std::vector<uint8_t>(static_cast<size_t>(w * out_height * 3))};
  for (int64_t y = 0; y < out_height; ++y) {
    const int32_t* k = c.weights.data() + y * c.ksize;
    const uint8_t* src = in.rgb.data() + (c.first[static_cast<size_t>(y)] - row0) * w * 3;
    for (int64_t x = 0; x < w * 3; ++x) {
      int64_t acc = 1 << (kPrecisionBits - 1);
      for (int64_t i = 0; i < c.count[static_cast<size_t>(y)]; ++i) acc += int64_t{src[i * w * 3 + x]} * k[i];
      out.rgb[static_cast<size_t>(y * w * 3 + x)] = clip8(acc);
    }
  }
  return out;
}

RgbImage resize_nearest(const RgbImage& in, int64_t width, int64_t height) {
  // PIL samples the source pixel under each output pixel's centre (ImagingTransformAffine, nearest).
  RgbImage out{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  const double sx = static_cast<double>(in.width) / static_cast<double>(width);
  const double sy = static_cast<double>(in.height) / static_cast<double>(height);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t src_y = std::min(in.height - 1, static_cast<int64_t>((static_cast<double>(y) + 0.5) * sy));
    for (int64_t x = 0; x < width; ++x) {
      const int64_t src_x = std::min(in.width - 1, static_cast<int64_t>((static_cast<double>(x) + 0.5) * sx));
      for (int ch = 0; ch < 3; ++ch) out.rgb[static_cast<size_t>((y * width + x) * 3 + ch)] = in.at(src_x, src_y, ch);
    }
  }
  return out;
}

}  // namespace

const char* resample_name(Resample r) {
  switch (r) {
    case Resample::kNearest: return "nearest";
    case Resample::kLanczos: return "lanczos";
    case Resample::kBilinear: return "bilinear";
    case Resample::kBicubic: return "bicubic";
    case Resample::kBox: return "box";
    case Resample::kHamming: return "hamming";
  }
  return "unknown";
}

RgbImage resize_image(const RgbImage& in, int64_t width, int64_t height, Resample resample) {
  MINFER_CHECK(width > 0 && height > 0 && in.width > 0 && in.height > 0, "resize {}x{} to {}x{}", in.width, in.height,
               width, height);
  if (width == in.width && height == in.height) return in;
  if (resample == Resample::kNearest) return resize_nearest(in, width, height);
  const Filter filter = filter_of(resample);
  const Coefficients cx = precompute(in.width, width, filter);
  const Coefficients cy = precompute(in.height, height, filter);
  // The horizontal pass only over the source rows the vertical pass reads, as PIL does.
  const int64_t row0 = cy.first.front();
  const int64_t row_end = cy.first.back() + cy.count.back();
  if (width == in.width) return resample_y(in, 0, cy, height);
  RgbImage tmp = resample_x(in, row0, row_end - row0, cx, width);
  if (height == in.height) return tmp;
  return resample_y(tmp, row0, cy, height);
}

RgbImage crop_image(const RgbImage& in, int64_t left, int64_t top, int64_t width, int64_t height) {
  RgbImage out{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3), 0)};
  for (int64_t y = 0; y < height; ++y) {
    const int64_t sy = top + y;
    if (sy < 0 || sy >= in.height) continue;
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sx = left + x;
      if (sx < 0 || sx >= in.width) continue;
      for (int ch = 0; ch < 3; ++ch) out.rgb[static_cast<size_t>((y * width + x) * 3 + ch)] = in.at(sx, sy, ch);
    }
  }
  return out;
}

}  // namespace minfer::media
