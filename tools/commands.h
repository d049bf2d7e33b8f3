// Each `minfer` sub-command registers itself on the CLI11 app; one file per command.
#pragma once

#include <CLI/CLI.hpp>

namespace minfer::tools {

void add_bench_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_make_test_model_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);

}  // namespace minfer::tools
