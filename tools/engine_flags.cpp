#include "tools/engine_flags.h"

#include <string>

namespace minfer::tools {

void add_kv_cache_dtype_flag(CLI::App& cmd, KvCacheDtype& dtype) {
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype", [&dtype](const std::string& v) { parse_kv_cache_dtype(v, &dtype); },
         "KV cache element type: auto (bf16 for bf16 weights, else f32), f32 or bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->option_text("auto|f32|bf16")
      ->default_str("auto");
}

}  // namespace minfer::tools
