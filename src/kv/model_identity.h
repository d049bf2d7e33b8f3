// A model's identity for the KV tiers that outlive a process (disk_tier.h): everything that changes the values of its
// KV. A checksum of the weight files' bytes (XXH3-128: a retrained file with the same name and size is another
// model) and the engine's settings that change KV (KV dtype, page size, this rank's heads, weight quantization,
// fusion, the kernels' instruction set, the tier format), as a string the caller builds.
#pragma once

#include <filesystem>
#include <string>

#include "kv/content_key.h"

namespace minfer {

// model_path: a file (GGUF, llama2.c) or a Hugging Face folder (its *.safetensors, *.bin, *.gguf and *.json files).
// The weights' checksum is remembered in memo_dir (when given) under the files' names, sizes, times and inodes, so a
// restart does not read the weights twice.
ContentKey model_identity(const std::string& model_path, const std::string& settings,
                          const std::filesystem::path& memo_dir = {});

}  // namespace minfer
