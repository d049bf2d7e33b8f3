// What the CPU can run, detected once with CPUID/XGETBV (and the Linux AMX permission request).
#pragma once

#include <string>

namespace minfer {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool amx_tile = false;  // also requires the kernel to grant the AMX state (arch_prctl)
  bool amx_bf16 = false;
  bool amx_int8 = false;

  bool has_avx2_fma() const { return avx2 && fma && f16c; }
  bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  std::string describe() const;
};

// Detected on first use; the environment variable MINFER_ISA=scalar|avx2|avx512|avx512_bf16 caps what is reported
// (for testing every dispatch path on one machine).
const CpuFeatures& cpu_features();

}  // namespace minfer
