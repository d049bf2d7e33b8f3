#include "model/quant/quantize_model.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/quant.h"

namespace minfer {
namespace {

bool is_matrix_weight(const std::string& name, const Tensor& t) {
  return t.rank() == 2 && (name == "embed" || name == "lm_head" || name.rfind("layers.", 0) == 0);
}

// The embedding / lm_head: kept at W8A16 even for W8A8 (see quantize_model).
bool is_vocab_matrix(const std::string& name) { return name == "embed" || name == "lm_head"; }

}  // namespace

QuantConfig parse_quantization(const std::string& mode, int group_size, bool symmetric) {
  QuantConfig q;
  q.group_size = group_size;
  q.symmetric = symmetric;
  if (mode == "none" || mode == "bf16" || mode.empty()) {
    return q;
  } else if (mode == "w8a16") {
    q.weight_bits = 8;
    q.activation_bits = 16;
  } else if (mode == "w8a8") {
    q.weight_bits = 8;
    q.activation_bits = 8;
  } else {
    fail("unknown quantization '{}' (use none, w8a16 or w8a8)", mode);
  }
  validate_quant_config(q);
  return q;
}

std::string quantization_name(const QuantConfig& q) {
  if (!q.enabled()) return "none";
  std::string s = q.activation_bits == 8 ? "w8a8" : "w8a16";
  s += q.group_size == 0 ? ", per-channel" : ", group " + std::to_string(q.group_size);
  s += q.symmetric ? ", symmetric" : ", asymmetric";
  return s;
}

void validate_quant_config(const QuantConfig& q) {
  if (q.weight_bits != 8 && q.weight_bits != 16)
    fail("quantization: weight_bits {} is not supported (8, or 16 for none)", q.weight_bits);
  if (q.activation_bits != 8 && q.activation_bits != 16)
    fail("quantization: activation_bits {} is not supported (8 or 16)", q.activation_bits);
  if (q.weight_bits == 16 && q.activation_bits == 8) fail("quantization: int8 activations need int8 weights (w8a8)");
  if (q.group_size != 0 && q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    fail("quantization: group_size {} is not supported (0 = per channel, 32, 64, 128)", q.group_size);
}

void quantize_model(ModelWeights& weights, const QuantConfig& q, int threads, const QuantProgress& progress,
                    const SmoothingPlan* smoothing) {
  if (!q.enabled()) return;
  validate_quant_config(q);
  std::vector<std::string> names;
  // The MTP blocks (mtp.*) are not run yet: they stay as the checkpoint stores them, mapped, not quantized copies.
  for (const auto& [name, t] : weights.tensors)
    if (is_matrix_weight(name, t) && !name.starts_with("mtp.")) names.push_back(name);
  std::vector<Tensor> out(names.size());
  std::atomic<size_t> done{0};
  std::mutex progress_mutex;
  ThreadPool pool(threads);
  pool.parallel_for(names.size(), 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const Tensor& w = weights.tensors.at(names[i]);
      const bool int8_acts = q.activation_bits == 8 && !is_vocab_matrix(names[i]);
      if (w.dtype == DType::Q8_0 || kernels::is_quantized(w)) {
        out[i] = kernels::relayout(w, int8_acts);
      } else {
        const WeightFactors* f = nullptr;
        if (smoothing) {
          auto it = smoothing->find(names[i]);
          if (it != smoothing->end()) f = &it->second;
        }
        if (f) {
          MINFER_CHECK(f->columns.empty() || static_cast<int64_t>(f->columns.size()) == w.dim(1),
                       "smoothing column factors for {}", names[i]);
          MINFER_CHECK(f->rows.empty() || static_cast<int64_t>(f->rows.size()) == w.dim(0),
                       "smoothing row factors for {}", names[i]);
        }
        out[i] = kernels::quantize_matrix(
            w,
            kernels::QuantScheme{.group_size = q.group_size, .symmetric = q.symmetric, .int8_activations = int8_acts},
            f && !f->columns.empty() ? f->columns.data() : nullptr, f && !f->rows.empty() ? f->rows.data() : nullptr);
      }
      const size_t n = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress(n, names.size(), names[i]);
      }
    }
  });
  for (size_t i = 0; i < names.size(); ++i) weights.tensors[names[i]] = std::move(out[i]);
  weights.quant = q;
  weights.config.dtype = weights.tensors.at("layers.0.wq").dtype;
}

uint64_t weight_bytes(const ModelWeights& weights) {
  uint64_t total = 0;
  for (const auto& [name, t] : weights.tensors) total += kernels::resident_bytes(t);
  return total;
}

uint64_t estimated_weight_bytes(const ModelWeights& weights, const QuantConfig& q) {
  uint64_t total = 0;
  for (const auto& [name, t] : weights.tensors) {
    const uint64_t numel = static_cast<uint64_t>(t.numel());
    if (!q.enabled() || !is_matrix_weight(name, t)) {
      total += 2 * numel;  // bf16
      continue;
    }
    const int64_t n = t.dim(0), k = t.dim(1);
    const int64_t gs = q.group_size == 0 || q.group_size >= k ? k : q.group_size;
    const uint64_t groups = static_cast<uint64_t>((k + gs - 1) / gs);
    const uint64_t per_group = q.symmetric ? 4 : 8;  // f32 scale (+ f32 zero point)
    const bool panels = q.activation_bits == 8 && !is_vocab_matrix(name);
    if (panels) {
      const uint64_t np = static_cast<uint64_t>((n + 15) / 16 * 16), k4 = static_cast<uint64_t>((k + 3) / 4 * 4);
      total += np * k4 + np * groups * (q.symmetric ? 8 : 12) + static_cast<uint64_t>(n) * groups * per_group;
    } else {
      total += numel + static_cast<uint64_t>(n) * groups * per_group;
    }
  }
  return total;
}

}  // namespace minfer
