// A multimodal model's images: prepared on the caller's thread (decoded, preprocessed, hashed, the prompt's
// placeholders expanded into content-keyed image tokens), encoded on the step thread when a scheduled chunk first
// reaches them, and their embeddings kept by content key so a repeated image is encoded once.
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>

#include "base/error.h"
#include "engine/engine_core.h"
#include "media/image.h"

namespace minfer {
namespace {

constexpr size_t kImageCacheEntries = 64;  // recent images' embeddings kept (Gemma 3 4B: 2.6 MB each)

}  // namespace

void EngineCore::start_vision() {
  if (!config_.mmproj.empty()) {
    if (weights_.vision) fail("{}: the model has a vision tower of its own; drop --mmproj", config_.model_path);
    auto tower =
        std::make_shared<vision::VisionModel>(vision::load_gguf_vision(config_.mmproj, weights_.config.hidden_size));
    // Gemma 3's image tokens, from the language model's vocabulary.
    int32_t* ids[] = {&tower->config.begin_image_id, &tower->config.end_image_id, &tower->config.image_token_id};
    const char* names[] = {"<start_of_image>", "<end_of_image>", "<image_soft_token>"};
    for (size_t i = 0; i < 3; ++i) {
      const std::optional<int32_t> id = tokenizer_ ? tokenizer_->token_id(names[i]) : std::nullopt;
      if (!id) fail_load(config_.model_path, "the vocabulary has no {} token for the projector's images", names[i]);
      *ids[i] = *id;
    }
    weights_.vision = std::move(tower);
  }
  if (!weights_.vision) return;
  if (shard_) fail("images under tensor parallel are not supported yet: serve {} with one process", config_.model_path);
  encoder_ = std::make_unique<vision::VisionEncoder>(
      weights_.vision, pool_, graph::FusionOptions{config_.fusion_strategy, config_.disabled_fusion_passes});
  spdlog::info("vision tower: {} dispatches per image batch", encoder_->graph().nodes().size());
  runner_->set_image_token_id(weights_.vision->config.image_token_id);
  // Gemma3Processor puts "\n\n" before and after each image's tokens.
  if (tokenizer_) image_wrap_ids_ = tokenizer_->encode("\n\n", /*add_special=*/false, /*parse_special=*/false);
}

std::vector<SeqImage> EngineCore::prepare_images(std::vector<int32_t>& prompt,
                                                 std::span<const std::string> images) const {
  if (images.empty()) return {};
  if (!weights_.vision) fail("{}: this model takes no images (it has no vision tower)", config_.model_path);
  const vision::VisionConfig& vc = weights_.vision->config;
  const auto placeholders = std::count(prompt.begin(), prompt.end(), vc.begin_image_id);
  if (placeholders != static_cast<int64_t>(images.size())) {
    fail("the prompt has {} image placeholders (token {}) for {} images: give one per image", placeholders,
         vc.begin_image_id, images.size());
  }
  std::vector<SeqImage> out;
  for (size_t i = 0; i < images.size(); ++i) {
    SeqImage img;
    try {
      const std::string& bytes = images[i];
      img.pixels = media::preprocess_image(
          media::decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, config_.max_image_pixels),
          vc.processor);
    } catch (const Error& e) {
      fail("image {}: {}", i, e.what());
    }
    const XXH128_hash_t h = XXH3_128bits(img.pixels.data.data(), img.pixels.data.size() * sizeof(float));
    img.key[0] = h.low64;
    img.key[1] = h.high64 ^ static_cast<uint64_t>(img.pixels.height << 20 | img.pixels.width);
    img.length = vc.tokens_per_image;
    out.push_back(std::move(img));
  }
  // <start_of_image> -> "\n\n" <start_of_image> image tokens <end_of_image> "\n\n", as Gemma3Processor expands it.
  std::vector<int32_t> expanded;
  size_t next = 0;
  for (int32_t t : prompt) {
    if (t != vc.begin_image_id) {
      expanded.push_back(t);
      continue;
    }
    SeqImage& img = out[next++];
    expanded.insert(expanded.end(), image_wrap_ids_.begin(), image_wrap_ids_.end());
    expanded.push_back(vc.begin_image_id);
    img.start = static_cast<int64_t>(expanded.size());
    for (int64_t j = 0; j < img.length; ++j) expanded.push_back(image_token_key(img.key, j));
    expanded.push_back(vc.end_image_id);
    expanded.insert(expanded.end(), image_wrap_ids_.begin(), image_wrap_ids_.end());
  }
  if (static_cast<int64_t>(expanded.size()) >= config_.max_model_len) {
    fail("the prompt is {} tokens with its {} images' tokens, the context holds {} (max_model_len)", expanded.size(),
         images.size(), config_.max_model_len);
  }
  prompt = std::move(expanded);
  return out;
}

void EngineCore::encode_images(const SchedulerOutput& sched) {
  std::vector<SeqImage*> todo, repeats;  // repeats: an image already in todo (the same picture twice this step)
  std::vector<media::PixelValues> pixels;
  for (const ScheduledChunk& c : sched.chunks) {
    const int64_t begin = c.seq->num_computed, end = begin + c.num_tokens;
    for (SeqImage& img : c.seq->images) {
      if (!img.unencoded_in(begin, end)) continue;
      const auto key = std::make_pair(img.key[0], img.key[1]);
      if (const auto hit = image_cache_.find(key); hit != image_cache_.end()) {
        img.embeddings = hit->second;
        continue;
      }
      const bool queued = std::any_of(todo.begin(), todo.end(), [&](const SeqImage* t) {
        return t->key[0] == img.key[0] && t->key[1] == img.key[1];
      });
      if (queued) {
        repeats.push_back(&img);
        continue;
      }
      todo.push_back(&img);
      pixels.push_back(std::move(img.pixels));
    }
  }
  if (todo.empty()) return;
  const std::vector<float> rows = encoder_->encode(pixels);
  const int64_t per_image = weights_.vision->config.tokens_per_image * weights_.vision->config.text_hidden;
  for (size_t i = 0; i < todo.size(); ++i) {
    const auto first = rows.begin() + static_cast<int64_t>(i) * per_image;
    auto embeddings = std::make_shared<const std::vector<float>>(first, first + per_image);
    todo[i]->embeddings = embeddings;
    const auto key = std::make_pair(todo[i]->key[0], todo[i]->key[1]);
    if (image_cache_.emplace(key, embeddings).second) image_cache_order_.push_back(key);
    if (image_cache_order_.size() > kImageCacheEntries) {
      image_cache_.erase(image_cache_order_.front());
      image_cache_order_.pop_front();
    }
  }
  for (SeqImage* img : repeats) img->embeddings = image_cache_.at(std::make_pair(img->key[0], img->key[1]));
  spdlog::debug("encoded {} images ({} dispatches)", todo.size(), encoder_->dispatches_last());
}

}  // namespace minfer
