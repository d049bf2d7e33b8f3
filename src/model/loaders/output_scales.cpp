// Granite's residual_multiplier and logits_scaling folded into the weights once at load: x + m * (W h) is
// x + (m W) h, and lm_head(norm(x) * w) / s is lm_head(norm(x) * (w / s)), so no graph node, fusion pass or kernel
// knows of them and the o/down GEMMs keep their residual epilogues. The cost is one rounding of each scaled weight
// to its own type: exact enough in f32 (1 ulp), 2^-9 relative in bf16 (below bf16's own step in the products), and
// for the GGUF block types the f16 scale fields rescaled (2^-11 relative, far below their quantization error; the
// integer codes are untouched).
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "model/loaders/loaders.h"
#include "tensor/quant_params.h"

namespace minfer {
namespace {

// Byte offsets of the f16 fields that scale a GGUF block (d, and the min / offset where the type has one).
std::vector<int64_t> f16_scale_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

void scale_f16_at(uint8_t* p, float s) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  h = f32_to_f16(f16_to_f32(h) * s);
  std::memcpy(p, &h, 2);
}

// A copy of w with every element multiplied by s, in w's own dtype and layout (row-major weights, as loaded).
Tensor scaled(const Tensor& w, float s, const std::string& name) {
  if (w.quant) {  // int8 with per-channel (group) scales: scale those, exactly
    Tensor out = w;
    auto params = std::make_shared<QuantParams>(*w.quant);
    params->scales = to_f32(params->scales);  // a fresh f32 copy, ours to change
    float* v = params->scales.mutable_as<float>();
    for (int64_t i = 0; i < params->scales.numel(); ++i) v[i] *= s;
    out.quant = std::move(params);
    return out;
  }
  Tensor out = Tensor::allocate(w.dtype, w.shape);
  std::memcpy(out.mutable_as<uint8_t>(), w.as<uint8_t>(), w.nbytes());
  uint8_t* bytes = out.mutable_as<uint8_t>();
  const int64_t n = w.numel();
  switch (w.dtype) {
    case DType::F32: {
      float* v = out.mutable_as<float>();
      for (int64_t i = 0; i < n; ++i) v[i] *= s;
      return out;
    }
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) scale_f16_at(bytes + 2 * i, s);
      return out;
    case DType::BF16: {
      uint16_t* v = out.mutable_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) v[i] = f32_to_bf16(bf16_to_f32(v[i]) * s);
      return out;
    }
    default: break;
  }
  const std::vector<int64_t> fields = f16_scale_fields(w.dtype);
  if (fields.empty()) fail("cannot fold an output multiplier into weight '{}' of type {}", name, dtype_name(w.dtype));
  const BlockShape block = dtype_block(w.dtype);
  for (int64_t b = 0; b < n / block.elements; ++b)
    for (int64_t f : fields) scale_f16_at(bytes + b * block.bytes + f, s);
  return out;
}

}  // namespace

void fold_output_scales(ModelWeights& w) {
  const ModelConfig& c = w.config;
  if (c.residual_multiplier != 1.0) {
    // Every projection that writes into the residual stream: the mixer's output (attention's o, a recurrent layer's
    // out projection) and the feed-forward's down projections (dense, each expert's, the shared expert's).
    const auto m = static_cast<float>(c.residual_multiplier);
    for (auto& [key, tensor] : w.tensors) {
      const bool writes_residual =
          key.ends_with(".wo") || key.ends_with(".w_down") || key.ends_with(".ssm_out") || key.ends_with(".conv_out");
      if (key.starts_with("layers.") && writes_residual) tensor = scaled(tensor, m, key);
    }
  }
  if (c.logits_scaling != 1.0)
    w.tensors["final_norm"] =
        scaled(to_f32(w.get("final_norm")), static_cast<float>(1.0 / c.logits_scaling), "final_norm");
}

}  // namespace minfer
