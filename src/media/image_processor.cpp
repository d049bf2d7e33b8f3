#include "media/image_processor.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer::media {
namespace {

int64_t int_field(const nlohmann::json& j, const char* key, int64_t fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0) {
    fail("preprocessor_config.json: `{}` must be a positive integer, got {}", key, j[key].dump());
  }
  return j[key].get<int64_t>();
}

bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

std::array<float, 3> triple(const nlohmann::json& j, const char* key, std::array<float, 3> fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  if (v.is_number()) return {v.get<float>(), v.get<float>(), v.get<float>()};
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
    fail("preprocessor_config.json: `{}` must be 3 numbers, got {}", key, v.dump());
  }
  return {v[0].get<float>(), v[1].get<float>(), v[2].get<float>()};
}

// `size` / `crop_size`: an int (a square; CLIP's older configs) or {height, width}.
void read_hw(const nlohmann::json& v, const char* key, int64_t& height, int64_t& width) {
  if (v.is_number_integer()) {
    height = width = v.get<int64_t>();
  } else {
    height = int_field(v, "height", 0);
    width = int_field(v, "width", 0);
  }
  if (height <= 0 || width <= 0)
    fail("preprocessor_config.json: `{}` needs a height and a width, got {}", key, v.dump());
}

}  // namespace

ImageProcessorConfig ImageProcessorConfig::from_json(const nlohmann::json& j) {
  ImageProcessorConfig c;
  if (!j.is_object()) fail("preprocessor_config.json: not a JSON object");
  const std::string type = j.value("image_processor_type", "");
  const nlohmann::json size = j.value("size", nlohmann::json::object());
  if (type.starts_with("Qwen2VL") || type.starts_with("Qwen2_5_VL") || type.starts_with("Qwen3VL") ||
      j.contains("min_pixels") || size.contains("longest_edge")) {
    c.rule = ResizeRule::kSmartResize;
    c.patch_size = int_field(j, "patch_size", 14);
    c.merge_size = int_field(j, "merge_size", 2);
    c.min_pixels = int_field(j, "min_pixels", int_field(size, "shortest_edge", c.min_pixels));
    c.max_pixels = int_field(j, "max_pixels", int_field(size, "longest_edge", c.max_pixels));
  } else if (size.is_object() && size.contains("shortest_edge")) {
    c.rule = ResizeRule::kShortestEdge;
    c.shortest_edge = int_field(size, "shortest_edge", 0);
    c.center_crop = bool_field(j, "do_center_crop", false);
    if (c.center_crop)
      read_hw(j.value("crop_size", nlohmann::json(c.shortest_edge)), "crop_size", c.crop_height, c.crop_width);
  } else {
    c.rule = ResizeRule::kFixed;
    read_hw(size.empty() ? nlohmann::json(224) : size, "size", c.height, c.width);
  }
  const int64_t resample =
      j.contains("resample") && j["resample"].is_number_integer() ? j["resample"].get<int64_t>() : int64_t{2};
  if (resample < 0 || resample > 5) fail("preprocessor_config.json: `resample` {} is not a PIL filter (0-5)", resample);
  c.resample = static_cast<Resample>(resample);
  c.rescale = bool_field(j, "do_rescale", true);
  if (j.contains("rescale_factor") && j["rescale_factor"].is_number()) c.rescale_factor = j["rescale_factor"];
  c.normalize = bool_field(j, "do_normalize", true);
  c.mean = triple(j, "image_mean", c.mean);
  c.std = triple(j, "image_std", c.std);
  for (float s : c.std)
    if (!(s > 0.0f)) fail("preprocessor_config.json: `image_std` must be positive");
  return c;
}

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels) {
  if (static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width)) > 200.0) {
    fail("image: an aspect ratio over 200 ({}x{}) is refused by the model's processor", width, height);
  }
  const auto f = static_cast<double>(factor);
  const auto h = static_cast<double>(height), w = static_cast<double>(width);
  // Python's round(): ties to even, which nearbyint does under the default rounding mode.
  auto h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  auto w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

RgbImage resize_for_model(const RgbImage& image, const ImageProcessorConfig& c) {
  switch (c.rule) {
    case ResizeRule::kFixed: return resize_image(image, c.width, c.height, c.resample);
    case ResizeRule::kSmartResize: {
      const auto [h, w] =
          smart_resize(image.height, image.width, c.patch_size * c.merge_size, c.min_pixels, c.max_pixels);
      return resize_image(image, w, h, c.resample);
    }
    case ResizeRule::kShortestEdge: {
      // transformers' get_resize_output_image_size(default_to_square=False): the long side int(size * long / short).
      const bool wide = image.width >= image.height;
      const int64_t short_side = wide ? image.height : image.width, long_side = wide ? image.width : image.height;
      const auto new_long = static_cast<int64_t>(static_cast<double>(c.shortest_edge) * static_cast<double>(long_side) /
                                                 static_cast<double>(short_side));
      const int64_t w = wide ? new_long : c.shortest_edge, h = wide ? c.shortest_edge : new_long;
      RgbImage resized = resize_image(image, w, h, c.resample);
      if (!c.center_crop) return resized;
      return crop_image(resized, (w - c.crop_width) / 2, (h - c.crop_height) / 2, c.crop_width, c.crop_height);
    }
  }
  return image;
}

PixelValues preprocess_image(const RgbImage& image, const ImageProcessorConfig& c) {
  const RgbImage r = resize_for_model(image, c);
  PixelValues out{r.height, r.width, std::vector<float>(static_cast<size_t>(3 * r.height * r.width))};
  const int64_t plane = r.height * r.width;
  for (int ch = 0; ch < 3; ++ch) {
    const float scale = c.rescale ? static_cast<float>(c.rescale_factor) : 1.0f;
    const float mean = c.normalize ? c.mean[static_cast<size_t>(ch)] : 0.0f;
    const float inv_std = c.normalize ? 1.0f / c.std[static_cast<size_t>(ch)] : 1.0f;
    for (int64_t i = 0; i < plane; ++i) {
      const float v = static_cast<float>(r.rgb[static_cast<size_t>(i * 3 + ch)]) * scale;
      out.data[static_cast<size_t>(ch * plane + i)] = (v - mean) * inv_std;
    }
  }
  return out;
}

}  // namespace minfer::media
