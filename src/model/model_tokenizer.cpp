#include "model/model_tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "formats/gguf_file.h"

namespace minfer {

std::unique_ptr<Tokenizer> load_tokenizer(const ModelWeights& weights) {
  const TokenizerSource& src = weights.tokenizer;
  if (!src.hf_tokenizer_json.empty()) return Tokenizer::from_hf_json(src.hf_tokenizer_json, src.hf_tokenizer_config_json);
  if (!src.gguf_path.empty()) return Tokenizer::from_gguf(*GgufFile::open(src.gguf_path));
  if (!src.llama2c_tokenizer_bin.empty()) return Tokenizer::from_llama2c(src.llama2c_tokenizer_bin);
  fail("{}: no tokenizer found (expected tokenizer.json, GGUF tokenizer metadata, or a llama2.c tokenizer .bin); "
       "pass token ids instead of text",
       weights.path);
}

std::vector<int32_t> eos_token_ids(const ModelWeights& weights, const Tokenizer* tokenizer) {
  std::vector<int32_t> ids = weights.config.eos_token_ids;
  if (tokenizer) {
    for (int32_t id : tokenizer->eos_ids()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ids.erase(std::remove_if(ids.begin(), ids.end(), [](int32_t id) { return id < 0; }), ids.end());
  return ids;
}

}  // namespace minfer
