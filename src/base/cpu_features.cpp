#include "base/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace minfer {
namespace {

uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux hides the AMX tile state until a process asks for it.
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid(1, a, b, c, d);
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave) return CpuFeatures{};
  const uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
  const bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = os_avx && ((b >> 5) & 1);
  f.avx512f = os_avx512 && ((b >> 16) & 1);
  f.avx512dq = os_avx512 && ((b >> 17) & 1);
  f.avx512bw = os_avx512 && ((b >> 30) & 1);
  f.avx512vl = os_avx512 && ((b >> 31) & 1);
  f.avx512_vnni = os_avx512 && ((c >> 11) & 1);
  f.amx_bf16 = os_amx && ((d >> 22) & 1);
  f.amx_tile = os_amx && ((d >> 24) & 1);
  f.amx_int8 = os_amx && ((d >> 25) & 1);
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = os_avx512 && ((a >> 5) & 1);
  f.fma = f.fma && os_avx;
  f.f16c = f.f16c && os_avx;
  if (f.amx_tile && !request_amx_permission()) f.amx_tile = f.amx_bf16 = f.amx_int8 = false;

  if (const char* cap = std::getenv("MINFER_ISA")) {
    const std::string_view isa(cap);
    if (isa == "scalar") {
      f = CpuFeatures{};
    } else if (isa == "avx2") {
      f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_vnni = false;
      f.amx_tile = f.amx_bf16 = f.amx_int8 = false;
    } else if (isa == "avx512") {
      f.amx_tile = f.amx_bf16 = f.amx_int8 = false;
      f.avx512_bf16 = false;
    } else if (isa == "avx512_bf16") {
      f.amx_tile = f.amx_bf16 = f.amx_int8 = false;
    }
  }
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vnni, "avx512_vnni");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace minfer
