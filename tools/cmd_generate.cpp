// Placeholder; replaced by the real command.
#include "tools/commands.h"

namespace minfer::tools {

void add_generate_command(CLI::App& app) { app.add_subcommand("generate", "not implemented yet"); }

}  // namespace minfer::tools
