// ModelConfig from a Hugging Face model directory: config.json, plus generation_config.json's eos_token_id.
#pragma once

#include <string>

#include "model/model_config.h"

namespace minfer {

// Reads <dir>/config.json and, when present, <dir>/generation_config.json. Throws LoadError naming the file:
// missing config.json, invalid JSON, a field of the wrong type, an unsupported architecture or feature.
// The result is validated (ModelConfig::validate); its dtype is torch_dtype's (the loader replaces it with the
// dtype the weights are actually stored in).
ModelConfig read_hf_config(const std::string& dir);

// The same from JSON text; `config_path` / `generation_path` name the texts in errors. An empty
// generation_config_text means there is none.
ModelConfig parse_hf_config(const std::string& config_text, const std::string& config_path,
                            const std::string& generation_config_text = "", const std::string& generation_path = "");

}  // namespace minfer
