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
  for (const graph::FusionPass& p : graph::fusion_passes()) names += std::string(names.empty() ? "" : ", ") + p.name;
  cmd.add_option("--disable-pass", options.disabled_passes, "Skip a fusion pass (debugging; repeatable): " + names)
      ->check(CLI::IsMember([] {
        std::vector<std::string> v;
        for (const graph::FusionPass& p : graph::fusion_passes()) v.push_back(p.name);
        return v;
      }()));
}

}  // namespace minfer::tools
