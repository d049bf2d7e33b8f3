#include "tools/quant_flags.h"

#include "model/quant/quantize_model.h"

namespace minfer::tools {

QuantConfig QuantFlags::config() const { return parse_quantization(mode, group_size, !asymmetric); }

void add_quant_flags(CLI::App& cmd, QuantFlags& flags, bool allow_none) {
  std::vector<std::string> modes = {"w8a16", "w8a8"};
  if (allow_none) modes.insert(modes.begin(), "none");
  cmd.add_option("--quantization", flags.mode,
                 "Quantize the weights to int8 at load: w8a16 (f32 activations) or w8a8 (int8 activations per token)")
      ->check(CLI::IsMember(modes))
      ->capture_default_str();
  cmd.add_option("--group-size", flags.group_size, "Weights per scale along K: 0 = one per output channel, 32/64/128")
      ->check(CLI::IsMember({0, 32, 64, 128}))
      ->capture_default_str();
  cmd.add_flag("--asymmetric", flags.asymmetric, "Asymmetric weight quantization (a zero point per scale)");
}

}  // namespace minfer::tools
