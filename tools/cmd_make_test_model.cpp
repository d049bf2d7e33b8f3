// Placeholder; replaced by the real command.
#include "tools/commands.h"

namespace minfer::tools {

void add_make_test_model_command(CLI::App& app) { app.add_subcommand("make-test-model", "not implemented yet"); }

}  // namespace minfer::tools
