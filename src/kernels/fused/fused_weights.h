// Weight layouts of the fused GEMMs, built once when the graph is compiled (the loaded weights stay as they
// are, in the checkpoint's mmap). Rows are copied, never converted: the packed tensor has the input's dtype, and
// an int8 weight keeps its quantization (each row's scales and zero points travel with it; W8A8 panels are
// rebuilt from the packed rows), so a quantized model fuses exactly as a float one.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace minfer::kernels::fused {

// True when the fused GEMM can pack these weights: the same width and dtype, row-major, one of f32/f16/bf16
// (matrices or 1-D biases), GGUF Q8_0, or int8 with scales of the same scheme (group size, symmetry, W8A8).
bool packable(const Tensor& a, const Tensor& b);

// [k_0; v_0; k_1; v_1; ...; q] by rows, each k_g / v_g the head_dim rows of kv head g (the layout
// RopeKvWriteEpilogue expects). wq [heads * head_dim, hidden], wk and wv [kv_heads * head_dim, hidden].
// Works for biases too (1-D, f32): pass them as wq, wk, wv.
Tensor pack_qkv(const Tensor& wq, const Tensor& wk, const Tensor& wv, int64_t head_dim);

// Gate and up rows interleaved in blocks of `block` rows: [gate 0..B-1; up 0..B-1; gate B..2B-1; ...]; the last
// block may be shorter (the layout SiluMulEpilogue expects).
Tensor interleave_gate_up(const Tensor& w_gate, const Tensor& w_up, int64_t block);

}  // namespace minfer::kernels::fused
