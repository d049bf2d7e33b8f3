// Reference rotary embedding. Angles are computed in f32 as HF does (position * inv_freq, then cos/sin), once per
// token row (rope_angles), and every head of the row is rotated by them.
#include <cmath>

#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

void rope_angles(const int32_t* positions, int64_t tokens, const float* inv_freq, int64_t half_rot, float* cos,
                 float* sin) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half_rot; ++i) {
      const float angle = pos * inv_freq[i];
      cos[t * half_rot + i] = std::cos(angle);
      sin[t * half_rot + i] = std::sin(angle);
    }
  }
}

void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half_rot; ++i) {
        const float c = cos[t * half_rot + i];
        const float s = sin[t * half_rot + i];
        const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = style == RopeStyle::kNeox ? i + half_rot : 2 * i + 1;
        const float x0 = v[a];
        const float x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x1 * c + x0 * s;
      }
    }
  }
}

}  // namespace minfer::kernels::ref
