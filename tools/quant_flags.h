// The quantization flags shared by `generate`, `bench`, `eval-ppl`, `eval-quant`, `info` and `quantize`:
// --quantization none|w8a16|w8a8, --group-size 0|32|64|128, --asymmetric. They map to EngineConfig::quant.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "minfer/config.h"

namespace minfer::tools {

struct QuantFlags {
  std::string mode = "none";
  int group_size = 0;
  bool asymmetric = false;
  // Throws Error on an unsupported combination.
  QuantConfig config() const;
};

// allow_none: whether --quantization none is accepted (not for `minfer quantize`).
void add_quant_flags(CLI::App& cmd, QuantFlags& flags, bool allow_none = true);

}  // namespace minfer::tools
