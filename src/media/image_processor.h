// A model's image processor (its preprocessor_config.json), as Hugging Face's PIL processors apply it: resize (a fixed
// size as Gemma 3 and SigLIP, the shortest edge then a centre crop as CLIP, or Qwen's smart_resize to a multiple of
// the patch grid within a pixel budget), rescale, normalise, channels first.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "media/image.h"
#include "media/image_resize.h"

namespace minfer::media {

enum class ResizeRule : uint8_t {
  kFixed,         // size {height, width}
  kShortestEdge,  // size {shortest_edge}, aspect kept, then the crop_size centre crop when do_center_crop
  kSmartResize,   // Qwen2-VL / Qwen2.5-VL / Qwen3-VL: multiples of patch_size * merge_size within [min, max] pixels
};

struct ImageProcessorConfig {
  ResizeRule rule = ResizeRule::kFixed;
  int64_t height = 224, width = 224;  // kFixed
  int64_t shortest_edge = 0;          // kShortestEdge
  bool center_crop = false;
  int64_t crop_height = 0, crop_width = 0;
  int64_t patch_size = 14, merge_size = 1;  // kSmartResize: the grid's factor is their product
  int64_t min_pixels = 56 * 56, max_pixels = 28 * 28 * 1280;
  Resample resample = Resample::kBilinear;
  bool rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool normalize = true;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};

  // From a preprocessor_config.json (or the `vision` fields a GGUF projector carries, converted by its reader).
  // Throws Error naming the field that cannot be served.
  static ImageProcessorConfig from_json(const nlohmann::json& j);
};

// Channels-first float pixels, [3, height, width], as pixel_values holds one image.
struct PixelValues {
  int64_t height = 0, width = 0;
  std::vector<float> data;
};

// Qwen's smart_resize: the size (height, width) an image of height x width is resized to.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels);

// The image resized and cropped per the config, still 8-bit (what PIL holds before rescale).
RgbImage resize_for_model(const RgbImage& image, const ImageProcessorConfig& config);
// resize_for_model, then rescale and normalise.
PixelValues preprocess_image(const RgbImage& image, const ImageProcessorConfig& config);

}  // namespace minfer::media
