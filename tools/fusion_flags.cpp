#include "tools/fusion_flags.h"

#include <string>

namespace minfer::tools {

void add_fusion_flags(CLI::App& cmd, graph::FusionOptions& options) {
  cmd.add_option_function<std::string>(
         "--fusion",
         [&options](const std::string& v) {
           options.strategy = v == "none" ? FusionStrategy::kNone : FusionStrategy::kAuto;
         },
         "Operator fusion: auto (every pass) or none (one node per op)")
      ->check(CLI::IsMember({"auto", "none"}))
      ->option_text("auto|none")
      ->default_str("auto");
  std::string names;
  for (const std::string& p : graph::pass_names()) names += (names.empty() ? "" : ", ") + p;
  cmd.add_option("--disable-pass", options.disabled_passes,
                 "Skip a fusion or weight-layout pass (debugging; repeatable): " + names)
      ->check(CLI::IsMember(graph::pass_names()));
}

}  // namespace minfer::tools
