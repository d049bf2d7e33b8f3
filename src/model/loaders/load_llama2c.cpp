// llama2.c legacy .bin: the header -> config (theta 10000, eps 1e-5, interleaved RoPE as in run.c), the stacked
// f32 weights sliced per layer in place, the tokenizer .bin found beside it.
#include <filesystem>

#include "base/error.h"
#include "formats/llama2c_file.h"
#include "model/loaders/loaders.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

// Prefers the tokenizer named for the vocabulary size (tok512.bin for vocab 512), then llama2.c's default
// tokenizer.bin, then any other tok*.bin.
std::string find_tokenizer(const std::string& model_path, int64_t vocab) {
  const fs::path dir = fs::path(model_path).parent_path().empty() ? fs::path(".") : fs::path(model_path).parent_path();
  for (const std::string& name : {"tok" + std::to_string(vocab) + ".bin", std::string("tokenizer.bin")}) {
    if (fs::is_regular_file(dir / name)) return (dir / name).string();
  }
  std::error_code ec;
  std::string found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind("tok", 0) == 0 && entry.path().extension() == ".bin" &&
        (found.empty() || entry.path().string() < found))
      found = entry.path().string();
  }
  return found;
}

// llama2.c's names of the per-layer weights -> canonical suffixes (w1 = gate, w3 = up, w2 = down).
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"rms_att", "attn_norm"}, {"wq", "wq"},     {"wk", "wk"},   {"wv", "wv"},     {"wo", "wo"},
    {"rms_ffn", "ffn_norm"},  {"w1", "w_gate"}, {"w3", "w_up"}, {"w2", "w_down"},
};

}  // namespace

ModelWeights load_llama2c_checkpoint(const std::string& path) {
  const auto file = Llama2cFile::open(path);
  const Llama2cHeader& h = file->header();
  ModelWeights w;
  w.format = CheckpointFormat::kLlama2c;
  w.path = path;
  ModelConfig& c = w.config;
  c.arch = "llama";
  c.vocab_size = h.vocab_size;
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_layers = h.n_layers;
  c.num_heads = h.n_heads;
  c.num_kv_heads = h.n_kv_heads;
  c.head_dim = h.head_size();
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope_style = kernels::RopeStyle::kInterleaved;
  c.tie_word_embeddings = h.shared_classifier;
  c.attention_bias = false;
  c.dtype = DType::F32;
  // The Llama 2 SentencePiece convention of llama2.c's tokenizers: <s> = 1, </s> = 2. (run.c itself stops a
  // generation when it samples BOS; ids 1 and 2 are both specials of tok*.bin.)
  c.bos_token_id = c.vocab_size > 1 ? 1 : -1;
  if (c.vocab_size > 2) c.eos_token_ids = {2};
  c.validate(path);

  std::map<std::string, WeightOrigin> origins;
  auto add = [&](const std::string& canonical, Tensor t, const std::string& name) {
    w.tensors[canonical] = std::move(t);
    origins[canonical] = {path, name};
  };
  const auto& all = file->tensors();
  add("embed", all.at("token_embedding"), "token_embedding");
  add("final_norm", all.at("rms_final"), "rms_final");
  if (!h.shared_classifier) add("lm_head", all.at("wcls"), "wcls");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string prefix = "layers." + std::to_string(i) + ".";
    for (const auto& [name, canonical] : kLayerNames)
      add(prefix + canonical, file->layer_slice(name, i), fmt::format("{}[{}]", name, i));
  }
  check_weights(w, origins, path, [](const std::string& canonical) { return canonical; });

  w.tokenizer.llama2c_tokenizer_bin = find_tokenizer(path, c.vocab_size);
  return w;
}

}  // namespace minfer
