// The engine flags every command that runs the engine shares (generate, serve, bench offline, eval-ppl),
// spelled as vLLM spells them where vLLM has the flag: --max-model-len, --max-num-seqs,
// --max-num-batched-tokens, --enable-prefix-caching / --no-enable-prefix-caching, --page-size (alias
// --block-size), --quantization, --kv-cache-dtype, --kv-cache-memory, --seed; plus MindIE's
// --fusion-strategy (alias --fusion). A command sets its own defaults in `config` before adding the flags.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "minfer/config.h"
#include "tools/quant_flags.h"

namespace minfer::tools {

struct EngineFlags {
  EngineConfig config;
  QuantFlags quant;
  bool no_continuous_batching = false;

  // The engine config the flags give (quantization resolved). Throws Error on an unsupported combination.
  EngineConfig resolve() const;
};

// model_help: how the command treats --model (required, or what it defaults to).
void add_engine_flags(CLI::App& cmd, EngineFlags& flags, const std::string& model_help);

// --fusion-strategy auto|none (alias --fusion) and --disable-pass NAME, into `strategy` and `disabled`
// (also for `bench ops`, which compiles the graph without an engine).
void add_fusion_flags(CLI::App& cmd, FusionStrategy& strategy, std::vector<std::string>& disabled);

}  // namespace minfer::tools
