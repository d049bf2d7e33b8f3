// The KV cache types' names (include/minfer/config.h), here beside their storage (kv_format.h) so the kernels can
// name a type in their errors.
#include "kernels/kv_format.h"

#include <string_view>

namespace minfer {

namespace {
struct KvDtypeName {
  std::string_view name;
  KvCacheDtype dtype;
};
// The first spelling of each type is its name.
constexpr KvDtypeName kKvDtypeNames[] = {
    {"auto", KvCacheDtype::kAuto},        {"f32", KvCacheDtype::kF32},       {"float32", KvCacheDtype::kF32},
    {"bf16", KvCacheDtype::kBf16},        {"bfloat16", KvCacheDtype::kBf16}, {"f16", KvCacheDtype::kF16},
    {"float16", KvCacheDtype::kF16},      {"half", KvCacheDtype::kF16},      {"int8", KvCacheDtype::kInt8},
    {"fp8_e4m3", KvCacheDtype::kFp8E4m3}, {"fp8", KvCacheDtype::kFp8E4m3},   {"q8_0", KvCacheDtype::kQ8_0},
    {"q4_0", KvCacheDtype::kQ4_0},
};
}  // namespace

bool parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out) {
  for (const KvDtypeName& n : kKvDtypeNames) {
    if (n.name == name) {
      *out = n.dtype;
      return true;
    }
  }
  return false;
}

const char* kv_cache_dtype_name(KvCacheDtype dtype) {
  for (const KvDtypeName& n : kKvDtypeNames)
    if (n.dtype == dtype) return n.name.data();
  return "";
}

}  // namespace minfer
