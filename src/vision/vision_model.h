// A multimodal checkpoint's vision tower and projector: its config (config.json's vision_config, the projector's
// fields beside it, and preprocessor_config.json) and its weights under canonical names:
//   v.patch_embd   [hidden, 3 * patch * patch]   (the Conv2d's kernel, channels then rows then columns)
//   v.patch_bias   [hidden]                      v.pos_embd [patches, hidden]
//   v.layers.{i}.ln1_w / ln1_b / ln2_w / ln2_b   [hidden] (f32)
//   v.layers.{i}.wq / wk / wv / wo [hidden, hidden]   bq / bk / bv / bo [hidden] (f32)
//   v.layers.{i}.fc1 [intermediate, hidden]  fc1_b   v.layers.{i}.fc2 [hidden, intermediate]  fc2_b
//   v.post_ln_w / v.post_ln_b [hidden]
//   mm.norm [hidden] (Gemma 3: 1 + w, f32)       mm.proj [text_hidden, hidden]
// Today: SigLIP with Gemma 3's projector (average pooling to mm_tokens_per_image, RMSNorm, a linear map).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "media/image_processor.h"
#include "tensor/tensor.h"

namespace minfer::vision {

enum class ProjectorKind : uint8_t { kGemma3 };

struct VisionConfig {
  ProjectorKind projector = ProjectorKind::kGemma3;
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0;
  int64_t patch_size = 14, image_size = 224, channels = 3;
  float eps = 1e-6f;
  int64_t tokens_per_image = 256;  // image tokens the language model sees per image (after the projector)
  int64_t text_hidden = 0;
  // The language model's tokens: the placeholder each image token is, and the ones around an image.
  int32_t image_token_id = -1, begin_image_id = -1, end_image_id = -1;
  media::ImageProcessorConfig processor;

  int64_t patches_per_side() const { return image_size / patch_size; }
  int64_t patches() const { return patches_per_side() * patches_per_side(); }
  int64_t head_dim() const { return hidden / heads; }
};

struct VisionModel {
  std::string path;  // the checkpoint the tower came from (for messages)
  VisionConfig config;
  std::map<std::string, Tensor> tensors;

  // Throws Error naming the weight and the checkpoint.
  const Tensor& get(const std::string& name) const;
};

// config.json's vision_config (and the projector's fields) and preprocessor_config.json of a Hugging Face
// directory; nullopt when config.json has no vision_config. Throws LoadError on a tower minfer cannot run.
std::optional<VisionConfig> read_hf_vision_config(const std::string& dir, int64_t text_hidden);

// The vision tower's name in a Hugging Face checkpoint -> its canonical name (above); nullopt for a name outside
// the tower and projector.
std::optional<std::string> hf_vision_to_canonical(std::string_view hf_name);
bool is_hf_vision_name(std::string_view hf_name);

// Makes the loaded tensors what the graph reads: the patch kernel flattened, norms and biases f32, Gemma's
// (1 + w) norm (norm_has_one: the checkpoint stores 1 + w already, as llama.cpp's mmproj files do), the projection
// transposed to [text_hidden, hidden]; checks every weight's shape. Throws LoadError.
void finish_vision_weights(VisionModel& model, bool norm_has_one = false);

// A llama.cpp projector GGUF (`--mmproj FILE`, llama-server's flag: clip.* keys and v.* / mm.* tensors as mtmd's
// convert_hf_to_gguf writes them) for a language model of text_hidden. The image token ids are the caller's to set
// (they are the text model's vocabulary's). Throws LoadError naming the file and the problem.
VisionModel load_gguf_vision(const std::string& path, int64_t text_hidden);

}  // namespace minfer::vision
