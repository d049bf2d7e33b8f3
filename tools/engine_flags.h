// Engine flags shared by `serve` and `bench offline` (the fusion and quantization flags have their own files).
#pragma once

#include <CLI/CLI.hpp>

#include "minfer/config.h"

namespace minfer::tools {

// --kv-cache-dtype auto|f32|bf16, parsed straight into `dtype` (CLI11 rejects other values with the list).
void add_kv_cache_dtype_flag(CLI::App& cmd, KvCacheDtype& dtype);

}  // namespace minfer::tools
