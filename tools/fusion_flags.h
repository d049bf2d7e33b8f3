// The fusion flags shared by `generate`, `bench offline` and `bench ops`: --fusion auto|none and
// --disable-pass NAME (repeatable; names as `minfer bench ops --list-passes` prints them).
#pragma once

#include <CLI/CLI.hpp>

#include "graph/passes/fusion_passes.h"

namespace minfer::tools {

void add_fusion_flags(CLI::App& cmd, graph::FusionOptions& options);

}  // namespace minfer::tools
