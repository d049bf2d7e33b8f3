// load_gguf_vision: llama.cpp's projector files (mtmd's clip.* keys, v.* / mm.* tensors) read into the canonical
// vision weights (vision/vision_model.h). Today the Gemma 3 projector ("clip.projector_type" gemma3) over SigLIP.
#include <cmath>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "vision/vision_model.h"

namespace minfer::vision {
namespace {

// llama.cpp's names (tools/mtmd/clip-impl.h) -> ours, after "v.blk.{i}." / "v.layers.{i}." for the layer rows.
struct NameRow {
  const char* gguf;
  const char* canonical;
};
constexpr NameRow kGlobalRows[] = {
    {"v.patch_embd.weight", "v.patch_embd"},  {"v.patch_embd.bias", "v.patch_bias"},
    {"v.position_embd.weight", "v.pos_embd"}, {"v.post_ln.weight", "v.post_ln_w"},
    {"v.post_ln.bias", "v.post_ln_b"},        {"mm.input_projection.weight", "mm.proj"},
    {"mm.soft_emb_norm.weight", "mm.norm"},
};
constexpr NameRow kLayerRows[] = {
    {"ln1.weight", "ln1_w"},  {"ln1.bias", "ln1_b"},    {"ln2.weight", "ln2_w"},    {"ln2.bias", "ln2_b"},
    {"attn_q.weight", "wq"},  {"attn_q.bias", "bq"},    {"attn_k.weight", "wk"},    {"attn_k.bias", "bk"},
    {"attn_v.weight", "wv"},  {"attn_v.bias", "bv"},    {"attn_out.weight", "wo"},  {"attn_out.bias", "bo"},
    {"ffn_up.weight", "fc1"}, {"ffn_up.bias", "fc1_b"}, {"ffn_down.weight", "fc2"}, {"ffn_down.bias", "fc2_b"},
};

std::optional<std::string> canonical_name(std::string_view name) {
  for (const NameRow& r : kGlobalRows)
    if (name == r.gguf) return std::string(r.canonical);
  constexpr std::string_view kBlock = "v.blk.";
  if (!name.starts_with(kBlock)) return std::nullopt;
  name.remove_prefix(kBlock.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  const std::string_view index = name.substr(0, dot), rest = name.substr(dot + 1);
  if (index.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  for (const NameRow& r : kLayerRows)
    if (rest == r.gguf) return "v.layers." + std::string(index) + "." + r.canonical;
  return std::nullopt;
}

VisionConfig read_config(const GgufFile& f, int64_t text_hidden) {
  const std::string projector = f.get_string("clip.projector_type");
  if (projector != "gemma3")
    fail_load(f.path(), "clip.projector_type '{}' is not supported yet (supported: gemma3)", projector);
  if (!f.find_int("clip.has_vision_encoder").value_or(1)) fail_load(f.path(), "the projector has no vision encoder");
  VisionConfig c;
  c.hidden = f.get_int("clip.vision.embedding_length");
  c.intermediate = f.get_int("clip.vision.feed_forward_length");
  c.layers = f.get_int("clip.vision.block_count");
  c.heads = f.get_int("clip.vision.attention.head_count");
  c.patch_size = f.get_int("clip.vision.patch_size");
  c.image_size = f.get_int("clip.vision.image_size");
  c.eps = static_cast<float>(f.find_float("clip.vision.attention.layer_norm_epsilon").value_or(1e-6));
  const int64_t merge = f.find_int("clip.vision.projector.scale_factor").value_or(4);  // llama.cpp's default
  const int64_t side = c.image_size / std::max<int64_t>(c.patch_size, 1);
  if (c.heads <= 0 || c.hidden % c.heads != 0 || merge <= 0 || side % merge != 0)
    fail_load(f.path(), "clip.vision: hidden {} over {} heads, {} patches a side pooled by {}: not a Gemma 3 shape",
              c.hidden, c.heads, side, merge);
  c.tokens_per_image = (side / merge) * (side / merge);
  if (const auto dim = f.find_int("clip.vision.projection_dim"); dim && *dim != text_hidden)
    fail_load(f.path(), "the projector maps to {} dimensions, the language model has {}", *dim, text_hidden);
  c.text_hidden = text_hidden;
  // Gemma3ImageProcessor at the tower's size, with the file's mean and std.
  c.processor.height = c.processor.width = c.image_size;
  c.processor.resample = media::Resample::kBilinear;
  const std::vector<float> mean = f.get_float_array("clip.vision.image_mean");
  const std::vector<float> std_dev = f.get_float_array("clip.vision.image_std");
  if (mean.size() != 3 || std_dev.size() != 3) fail_load(f.path(), "clip.vision.image_mean / image_std need 3 values");
  for (size_t i = 0; i < 3; ++i) c.processor.mean[i] = mean[i], c.processor.std[i] = std_dev[i];
  return c;
}

}  // namespace

VisionModel load_gguf_vision(const std::string& path, int64_t text_hidden) {
  const auto file = GgufFile::open(path);
  if (file->find_string("general.architecture").value_or("") != "clip")
    fail_load(path, "not a projector file (general.architecture is '{}', want 'clip')",
              file->find_string("general.architecture").value_or(""));
  VisionModel m;
  m.path = path;
  m.config = read_config(*file, text_hidden);
  for (const GgufTensorInfo& info : file->tensors()) {
    const auto canonical = canonical_name(info.name);
    if (!canonical) fail_load(path, "unexpected tensor '{}' in a Gemma 3 projector", info.name);
    m.tensors[*canonical] = file->tensor(info);  // the view holds the file's mapping
  }
  finish_vision_weights(m, /*norm_has_one=*/true);
  return m;
}

}  // namespace minfer::vision
