// Placeholder; replaced by the real command.
#include "tools/commands.h"

namespace minfer::tools {

void add_info_command(CLI::App& app) { app.add_subcommand("info", "not implemented yet"); }

}  // namespace minfer::tools
