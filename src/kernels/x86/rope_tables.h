// What the AVX2 and AVX-512 RoPE leaves share: the interleaved style's per-row tables.
#pragma once

#include <cstdint>

namespace minfer::kernels::x86 {

// Largest rotated width handled with tables on the stack; wider (unheard of) heads use the reference.
constexpr int64_t kMaxRopeHalfRot = 512;

// Interleaved pairs (2i, 2i + 1) rotate as x' = x * cs + swap_pairs(x) * sn with cs = (c, c) and sn = (-s, +s)
// per pair: cs, sn [2 * half_rot] from one row of the step's cos/sin tables.
inline void interleaved_rope_row(const float* cos, const float* sin, int64_t half_rot, float* cs, float* sn) {
  for (int64_t i = 0; i < half_rot; ++i) {
    cs[2 * i] = cs[2 * i + 1] = cos[i];
    sn[2 * i] = -sin[i];
    sn[2 * i + 1] = sin[i];
  }
}

}  // namespace minfer::kernels::x86
