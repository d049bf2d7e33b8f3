// How the int8 elements of a quantized matrix map back to real values, and how they are laid out in memory.
//
// A quantized weight is a Tensor of dtype I8 with logical shape [N, K] (a Linear layer's [out, in]) and
// Tensor::quant set. Element k of row n stands for
//     w[n, k] = scale[n, g] * (q[n, k] - zero[n, g]),   g = k / group_size   (zero = 0 when symmetric)
// Layouts of Tensor::data:
//   kRows       q row-major [N, K] (what a checkpoint stores; the W8A16 kernels read it directly).
//   kVnniPanels [ceil(N/16)][ceil(K/4)][16][4]: panels of 16 rows, each 4 consecutive k of the 16 rows
//               side by side, so one 64-byte load feeds one VNNI dot-product step of 16 outputs (W8A8).
//               Padding rows and columns hold 0.
// (GGUF's Q8_0 is a separate dtype: blocks of one f16 scale and 32 int8, read directly by the W8A16 kernels.)
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace minfer {

struct QuantParams {
  enum class Layout : uint8_t { kRows, kVnniPanels };
  Layout layout = Layout::kRows;
  int64_t group_size = 0;  // row elements sharing one scale; equal to K for one scale per output channel
  int64_t groups = 1;      // ceil(K / group_size); the last group may be shorter
  bool symmetric = true;
  // W8A8: activations are quantized per token on the fly and multiplied in int8 (layout kVnniPanels).
  bool int8_activations = false;

  // Row form, kept in both layouts (checkpoints, embedding lookups, the reference kernels).
  Tensor scales;  // f32 [N, groups]
  Tensor zeros;   // f32 [N, groups] holding integers in [-128, 127]; empty when symmetric

  // kVnniPanels only, laid out [ceil(N/16)][groups][16] so 16 rows' values are one vector load.
  Tensor panel_scales;  // f32
  Tensor panel_qsum;    // i32: sum of q over the group (for the unsigned-activation offset of VNNI)
  Tensor panel_zeros;   // i32; empty when symmetric
};

}  // namespace minfer
