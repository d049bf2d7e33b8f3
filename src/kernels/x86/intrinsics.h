// <immintrin.h> for the x86 kernels, included through here so that the first inclusion (the one that counts) is
// always inside the pragmas: GCC 12 flags the deliberately undefined vectors inside its own AVX-512 intrinsics
// (_mm512_reduce_*, _mm512_permute_ps, ...) as (maybe-)uninitialized once inlined; the warning is a false positive.
// Silenced for the intrinsic headers only (the pragmas apply by source location).
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
