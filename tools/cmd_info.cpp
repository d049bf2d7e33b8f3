// `minfer info PATH`: what a checkpoint is (format, architecture, shapes, RoPE, parameters, bytes per dtype) and
// where its tokenizer comes from.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>

#include "base/error.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "model/quant/quantize_model.h"
#include "tools/commands.h"

namespace minfer::tools {
namespace {

const char* format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::kHuggingFace: return "Hugging Face (config.json + safetensors)";
    case CheckpointFormat::kGguf: return "GGUF";
    case CheckpointFormat::kLlama2c: return "llama2.c";
  }
  return "?";
}

std::string rope_description(const ModelConfig& c) {
  std::string s =
      fmt::format("theta {}, {} pairs", c.rope_theta,
                  c.rope_style == kernels::RopeStyle::kNeox ? "neox (i, i + d/2)" : "interleaved (2i, 2i+1)");
  const RopeScaling& r = c.rope_scaling;
  if (r.type == "llama3") {
    s += fmt::format(", scaling llama3 (factor {}, low_freq_factor {}, high_freq_factor {}, original context {})",
                     r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings);
  } else if (r.type == "linear") {
    s += fmt::format(", scaling linear (factor {})", r.factor);
  } else if (r.type == "longrope") {
    s += fmt::format(", scaling longrope ({} long / short factors, original context {}, attention factor {:.6g})",
                     r.long_factor.size(), r.original_max_position_embeddings, r.attention_factor);
  } else {
    s += ", no scaling";
  }
  if (!r.freq_factors.empty()) s += fmt::format(", {} per-frequency factors (rope_freqs)", r.freq_factors.size());
  if (c.rotary_dims() != c.head_dim) s += fmt::format(", on {} of {} dims", c.rotary_dims(), c.head_dim);
  if (c.sliding_window > 0) s += fmt::format("; sliding window {}", c.sliding_window);
  return s;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", b, units[u]);
}

std::string token_label(const Tokenizer& t, int32_t id) {
  if (id < 0 || id >= t.vocab_size()) return std::to_string(id);
  return fmt::format("{} {}", id, t.token_text(id));
}

void run_info(const std::string& path) {
  const ModelWeights w = load_model(path);
  const ModelConfig& c = w.config;
  fmt::print("path:          {}\n", w.path);
  fmt::print("format:        {}\n", format_name(w.format));
  fmt::print("architecture:  {}\n", c.arch_name());
  fmt::print("layers {}, hidden {}, heads {}, kv heads {}, head_dim {}, ffn {}, vocab {}, context {}\n", c.num_layers,
             c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.vocab_size,
             c.max_position_embeddings);
  fmt::print("rope:          {}\n", rope_description(c));
  fmt::print("rms_norm_eps:  {}\n", c.rms_norm_eps);
  fmt::print("embeddings:    {}\n", c.tie_word_embeddings ? "tied (lm_head = embed)" : "separate lm_head");
  fmt::print("qkv bias:      {}\n", c.attention_bias ? "yes" : "no");

  uint64_t params = 0;
  std::map<std::string, std::pair<uint64_t, size_t>> per_dtype;  // dtype -> bytes, tensors
  for (const auto& [name, t] : w.tensors) {
    params += static_cast<uint64_t>(t.numel());
    auto& [bytes, count] = per_dtype[std::string(dtype_name(t.dtype))];
    bytes += t.nbytes();
    ++count;
  }
  const double p = static_cast<double>(params);
  const std::string approx = p >= 1e9   ? fmt::format("{:.2f} B", p / 1e9)
                             : p >= 1e6 ? fmt::format("{:.1f} M", p / 1e6)
                                        : fmt::format("{:.1f} K", p / 1e3);
  fmt::print("parameters:    {} ({}) in {} tensors\n", params, approx, w.tensors.size());
  for (const auto& [dtype, v] : per_dtype)
    fmt::print("  {:5} {} in {} tensors\n", dtype, human_bytes(static_cast<double>(v.first)), v.second);
  // Resident weight bytes as loaded and, from the shapes, as bf16 / W8A16 / W8A8 (per-channel, symmetric).
  fmt::print("weights in memory: {} as loaded (quantization: {}); bf16 {}, w8a16 {}, w8a8 {}\n",
             human_bytes(static_cast<double>(weight_bytes(w))), quantization_name(w.quant),
             human_bytes(static_cast<double>(estimated_weight_bytes(w, QuantConfig{}))),
             human_bytes(static_cast<double>(estimated_weight_bytes(w, parse_quantization("w8a16")))),
             human_bytes(static_cast<double>(estimated_weight_bytes(w, parse_quantization("w8a8")))));

  std::string eos;
  for (int32_t id : c.eos_token_ids) eos += (eos.empty() ? "" : ", ") + std::to_string(id);
  fmt::print("config ids:    bos {}, eos [{}]\n", c.bos_token_id, eos);

  const TokenizerSource& src = w.tokenizer;
  if (!src.hf_tokenizer_json.empty()) {
    fmt::print("tokenizer:     {}{}\n", src.hf_tokenizer_json,
               src.hf_tokenizer_config_json.empty() ? "" : " + " + src.hf_tokenizer_config_json);
  } else if (!src.gguf_path.empty()) {
    fmt::print("tokenizer:     GGUF metadata of {}\n", src.gguf_path);
  } else if (!src.llama2c_tokenizer_bin.empty()) {
    fmt::print("tokenizer:     {}\n", src.llama2c_tokenizer_bin);
  } else {
    fmt::print("tokenizer:     none found\n");
    return;
  }
  try {
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(w);
    std::string tok_eos;
    for (int32_t id : tok->eos_ids()) tok_eos += (tok_eos.empty() ? "" : ", ") + token_label(*tok, id);
    fmt::print("               vocab {}, bos {}, eos [{}], adds bos: {}\n", tok->vocab_size(),
               tok->bos_id() < 0 ? std::string("none") : token_label(*tok, tok->bos_id()), tok_eos,
               tok->adds_bos() ? "yes" : "no");
    if (tok->vocab_size() > c.vocab_size)
      fmt::print("warning:       the tokenizer has more tokens ({}) than the model's vocabulary ({})\n",
                 tok->vocab_size(), c.vocab_size);
  } catch (const Error& e) {
    fmt::print("               cannot load: {}\n", e.what());
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("info", "Describe a checkpoint: format, architecture, shapes, parameters, tokenizer");
  cmd->add_option("path", *path, "Hugging Face model directory, .gguf file or llama2.c .bin")->required();
  cmd->callback([path] { run_info(*path); });
}

}  // namespace minfer::tools
