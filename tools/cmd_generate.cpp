// `minfer generate`: load a checkpoint, encode a prompt, stream the generated text to stdout.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/generator.h"
#include "kernels/kernels.h"
#include "model/default_model.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "model/quant/quantize_model.h"
#include "tools/commands.h"
#include "tools/fusion_flags.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct GenerateArgs {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  SamplingParams sampling;
  int threads = 0;
  int64_t max_seq_len = 0;
  std::string dump_prompt_logits;
  std::string ids_out;
  bool no_special = false;
  graph::FusionOptions fusion;
  QuantFlags quant;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    try {
      size_t used = 0;
      const long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail("--prompt-ids: '{}' is not an integer token id", word);
    }
  }
  return ids;
}

// --model, or the default model when none is given (model/default_model.h).
std::string model_path(const GenerateArgs& args) {
  if (!args.model.empty()) return args.model;
  const auto path = find_default_model();
  if (!path) fail("no --model given and {}", default_model_hint());
  spdlog::info("no --model given: using the default model, SmolLM2-135M-Instruct ({})", *path);
  return *path;
}

void run_generate(const GenerateArgs& args) {
  ModelWeights weights = load_model(model_path(args));
  quantize_model(weights, args.quant.config(), args.threads);  // no-op for --quantization none
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = load_tokenizer(weights);
  } catch (const Error& e) {
    if (!args.prompt_ids) throw;
    spdlog::warn("no tokenizer ({}); printing token ids", e.what());
  }

  std::vector<int32_t> prompt;
  if (args.prompt_ids) {
    prompt = parse_ids(*args.prompt_ids);
  } else if (args.prompt) {
    prompt = tokenizer->encode(*args.prompt, !args.no_special);
  } else if (tokenizer && tokenizer->bos_id() >= 0) {
    prompt = {tokenizer->bos_id()};
  } else {
    fail("give --prompt or --prompt-ids (this model has no BOS token to start from)");
  }

  GeneratorOptions options;
  options.num_threads = args.threads;
  options.max_seq_len = args.max_seq_len;
  options.fusion = args.fusion;
  Generator generator(weights, options);
  spdlog::info("{} model, {} layers, hidden {}, {} weights, kernels: {}, {} threads, {} prompt tokens",
               weights.config.arch_name(), weights.config.num_layers, weights.config.hidden_size,
               dtype_name(weights.config.dtype), kernels::kernels_summary(), options.num_threads, prompt.size());
  spdlog::info("weights in memory: {:.1f} MiB (quantization: {})",
               static_cast<double>(weight_bytes(weights)) / (1 << 20), quantization_name(weights.quant));

  // Echo the prompt text, then stream the continuation as complete UTF-8 pieces.
  std::optional<IncrementalDecoder> decoder;
  if (tokenizer) {
    decoder.emplace(*tokenizer, /*skip_special=*/true);
    if (args.prompt) std::fputs(args.prompt->c_str(), stdout);
  }
  auto on_token = [&](int32_t id) {
    const std::string piece = decoder ? decoder->push(id) : fmt::format("{} ", id);
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
    return true;
  };
  std::vector<float> prompt_logits;
  const std::vector<int32_t> eos = eos_token_ids(weights, tokenizer.get());
  const GenerationResult result = generator.generate(prompt, args.sampling, eos, on_token,
                                                     args.dump_prompt_logits.empty() ? nullptr : &prompt_logits);
  if (decoder) std::fputs(decoder->flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);

  if (!args.dump_prompt_logits.empty()) {
    std::ofstream out(args.dump_prompt_logits, std::ios::binary);
    out.write(reinterpret_cast<const char*>(prompt_logits.data()),
              static_cast<std::streamsize>(prompt_logits.size() * sizeof(float)));
    if (!out) fail("{}: cannot write the prompt logits", args.dump_prompt_logits);
  }
  if (!args.ids_out.empty()) {
    std::ofstream out(args.ids_out);
    for (size_t i = 0; i < result.token_ids.size(); ++i) out << (i ? " " : "") << result.token_ids[i];
    out << "\n";
    if (!out) fail("{}: cannot write the generated ids", args.ids_out);
  }
  const double n = static_cast<double>(result.token_ids.size());
  spdlog::info("prompt: {} tokens in {:.3f} s ({:.1f} tok/s); generated: {} tokens in {:.3f} s ({:.1f} tok/s); {}",
               result.prompt_tokens, result.prefill_seconds,
               static_cast<double>(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9),
               result.token_ids.size(), result.decode_seconds, n / std::max(result.decode_seconds, 1e-9),
               result.finish_reason == FinishReason::kStop ? "stopped" : "length");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  args->sampling.max_tokens = 128;
  args->sampling.temperature = 0.8f;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming tokens as they come");
  cmd->add_option("-m,--model", args->model,
                  "Hugging Face directory, .gguf file, or llama2.c .bin (default: SmolLM2-135M-Instruct from the "
                  "project venv)");
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", args->prompt_ids, "Prompt as space-separated token ids")->excludes(prompt);
  cmd->add_option("-n,--max-new-tokens", args->sampling.max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", args->sampling.top_k, "0 = off")->capture_default_str();
  cmd->add_option("--top-p", args->sampling.top_p, "1 = off")->capture_default_str();
  cmd->add_option("--min-p", args->sampling.min_p, "0 = off")->capture_default_str();
  cmd->add_option("--repetition-penalty", args->sampling.repetition_penalty, "1 = off")->capture_default_str();
  cmd->add_option("--presence-penalty", args->sampling.presence_penalty, "0 = off")->capture_default_str();
  cmd->add_option("--frequency-penalty", args->sampling.frequency_penalty, "0 = off")->capture_default_str();
  cmd->add_option("--seed", args->sampling.seed, "Random seed (repeatable sampling)");
  cmd->add_flag("--ignore-eos", args->sampling.ignore_eos, "Keep generating after an end-of-sequence token");
  cmd->add_option("-t,--threads", args->threads, "Worker threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--max-seq-len", args->max_seq_len, "Context length (0 = model's, capped at 8192)");
  cmd->add_flag("--no-special", args->no_special, "Do not add BOS when encoding the prompt");
  cmd->add_option("--dump-prompt-logits", args->dump_prompt_logits,
                  "Write the prompt's logits as raw little-endian f32 [prompt_len, vocab] to this file");
  cmd->add_option("--ids-out", args->ids_out, "Write the generated token ids (space-separated) to this file");
  add_fusion_flags(*cmd, args->fusion);
  add_quant_flags(*cmd, args->quant);
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace minfer::tools
