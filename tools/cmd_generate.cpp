// `minfer generate`: load a checkpoint, encode a prompt, stream the generated text to stdout (logs on stderr).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/engine_access.h"
#include "engine/speculative.h"
#include "kernels/kernels.h"
#include "minfer/engine.h"
#include "model/default_model.h"
#include "model/quant/quantize_model.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/tensor_parallel.h"

namespace minfer::tools {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  SamplingParams sampling;
  std::string dump_prompt_logits;
  std::vector<std::string> images;  // --image FILE: one per image placeholder of the prompt
  std::string ids_out;
  bool no_special = false;
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
std::string model_path(const std::string& given) {
  if (!given.empty()) return given;
  const auto path = find_default_model();
  if (!path) fail("no --model given and {}", default_model_hint());
  spdlog::info("no --model given: using the default model, SmolLM2-135M-Instruct ({})", *path);
  return *path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the image", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<int32_t> prompt_ids(const GenerateArgs& args, const Tokenizer* tokenizer) {
  if (args.prompt_ids) return parse_ids(*args.prompt_ids);
  if (!tokenizer) fail("this model has no tokenizer: give the prompt as --prompt-ids");
  if (args.prompt) return tokenizer->encode(*args.prompt, !args.no_special);
  if (tokenizer->bos_id() >= 0) return {tokenizer->bos_id()};
  fail("give --prompt or --prompt-ids (this model has no BOS token to start from)");
}

void write_outputs(const GenerateArgs& args, const CompletionOutput& result) {
  if (!args.dump_prompt_logits.empty()) {
    std::ofstream out(args.dump_prompt_logits, std::ios::binary);
    out.write(reinterpret_cast<const char*>(result.prompt_logits.data()),
              static_cast<std::streamsize>(result.prompt_logits.size() * sizeof(float)));
    if (!out) fail("{}: cannot write the prompt logits", args.dump_prompt_logits);
  }
  if (!args.ids_out.empty()) {
    std::ofstream out(args.ids_out);
    for (size_t i = 0; i < result.token_ids.size(); ++i) out << (i ? " " : "") << result.token_ids[i];
    out << "\n";
    if (!out) fail("{}: cannot write the generated ids", args.ids_out);
  }
}

// One sequence on the Engine: echoes the prompt text, then streams the continuation as it becomes final.
void run_generate(GenerateArgs& args) {
  EngineConfig config = args.engine.resolve();
  if (take_tensor_parallel_role(config)) return;
  config.model_path = model_path(config.model_path);
  config.max_num_seqs = 1;
  Engine engine(config);
  const Tokenizer* tokenizer = engine.tokenizer();
  const std::vector<int32_t> prompt = prompt_ids(args, tokenizer);
  const ModelConfig& m = EngineAccess::core(engine).model_config();
  spdlog::info("{} model, {} layers, hidden {}, {} weights, kernels: {}, {} threads, {} prompt tokens", m.arch_name(),
               m.num_layers, m.hidden_size, dtype_name(m.dtype), kernels::kernels_summary(),
               engine.config().num_threads, prompt.size());
  spdlog::info("weights in memory: {:.1f} MiB (quantization: {})",
               static_cast<double>(engine.stats().weight_bytes) / (1 << 20),
               quantization_name(EngineAccess::core(engine).weights().quant));

  SamplingParams params = args.sampling;
  params.prompt_logits = !args.dump_prompt_logits.empty();
  if (tokenizer && args.prompt) std::fputs(args.prompt->c_str(), stdout);
  std::vector<std::string> images;
  for (const std::string& path : args.images) images.push_back(read_file(path));
  RequestState state(engine.add_request(prompt, params, images), prompt, /*stream=*/false);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (!state.finished()) {
    for (RequestOutput& o : engine.step()) {
      const std::string text = tokenizer ? o.text_delta : fmt::format("{} ", fmt::join(o.new_token_ids, " "));
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      state.apply(std::move(o));
    }
  }
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const CompletionOutput result = state.result();
  write_outputs(args, result);

  const auto secs = [](Clock::duration d) { return std::max(std::chrono::duration<double>(d).count(), 1e-9); };
  const double prefill = secs(state.first_token_time().value_or(start) - start);
  const double decode = secs(*state.finish_time() - state.first_token_time().value_or(start));
  const double n = static_cast<double>(result.token_ids.size());
  spdlog::info("prompt: {} tokens in {:.3f} s ({:.1f} tok/s); generated: {} tokens in {:.3f} s ({:.1f} tok/s); {}",
               prompt.size(), prefill, static_cast<double>(prompt.size()) / prefill, result.token_ids.size(), decode,
               std::max(n - 1, 0.0) / decode, finish_reason_name(result.finish_reason));
  if (config.speculative.enabled())
    spdlog::info("speculative decoding ({}): {}", speculative_method_name(config.speculative.method),
                 spec_decode_summary(result.spec_decode));
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  args->sampling.max_tokens = 128;
  args->sampling.temperature = 0.8f;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming tokens as they come");
  add_engine_flags(*cmd, args->engine,
                   "Hugging Face directory, .gguf file, or llama2.c .bin (default: SmolLM2-135M-Instruct from the "
                   "project venv)");
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", args->prompt_ids, "Prompt as space-separated token ids")->excludes(prompt);
  cmd->add_option("--image", args->images,
                  "An image file (PNG, JPEG, WebP, GIF) for a multimodal model, one per image placeholder of the "
                  "prompt (Gemma 3: <start_of_image>); repeat for several");
  cmd->add_option("-n,--max-new-tokens", args->sampling.max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", args->sampling.top_k, "0 = off")->capture_default_str();
  cmd->add_option("--top-p", args->sampling.top_p, "1 = off")->capture_default_str();
  cmd->add_option("--min-p", args->sampling.min_p, "0 = off")->capture_default_str();
  cmd->add_option("--repetition-penalty", args->sampling.repetition_penalty, "1 = off")->capture_default_str();
  cmd->add_option("--presence-penalty", args->sampling.presence_penalty, "0 = off")->capture_default_str();
  cmd->add_option("--frequency-penalty", args->sampling.frequency_penalty, "0 = off")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->sampling.ignore_eos, "Keep generating after an end-of-sequence token");
  cmd->add_flag("--no-special", args->no_special, "Do not add BOS when encoding the prompt");
  cmd->add_option("--dump-prompt-logits", args->dump_prompt_logits,
                  "Write the prompt's logits as raw little-endian f32 [prompt_len, vocab] to this file");
  cmd->add_option("--ids-out", args->ids_out, "Write the generated token ids (space-separated) to this file");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace minfer::tools
