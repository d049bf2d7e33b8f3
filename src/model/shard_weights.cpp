#include "model/shard_weights.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "dist/expert_parallel.h"
#include "model/shard_mixers.h"

namespace minfer {
namespace {

// How one rank's slices sit in the full tensors.
struct Split {
  int rank = 0, ranks = 1;
  bool expert_parallel = false;
  int64_t head_dim = 0;
  int64_t heads = 0, first_head = 0;        // query heads
  int64_t kv_heads = 0, first_kv_head = 0;  // KV heads (one replicated head when there are fewer than ranks)
  int64_t ff = 0, moe_ff = 0;               // FFN columns per rank: dense MLP, each expert
  int64_t vocab_begin = 0, vocab_end = 0;
  dist::ExpertRange experts;
  const MixerShard* mixers = nullptr;

  static Tensor rows(const Tensor& t, int64_t first, int64_t count) {
    if (t.rank() == 1) return vector_slice(t, first, first + count);
    return row_slice(t, first, first + count);
  }
  Tensor columns(const std::string& name, const Tensor& t, int64_t first, int64_t count) const {
    const int64_t block = dtype_block(t.dtype).elements;
    if (first % block != 0 || count % block != 0)
      fail(
          "--tensor-parallel-size {}: {} ({} {}) would be split at column {} of {}, inside its {}-element blocks; "
          "use a tensor-parallel size whose split falls on block boundaries",
          ranks, name, dtype_name(t.dtype), t.shape_string(), first, t.dim(1), block);
    return column_slice(t, first, first + count);
  }

  // The rank's part of `name`; nullopt: the rank holds none of it (another rank's expert).
  std::optional<Tensor> part(const std::string& name, const Tensor& t) const {
    if (name == "embed" || name == "lm_head") return row_slice(t, vocab_begin, vocab_end);
    if (!name.starts_with("layers.")) return t;  // final_norm
    const std::string_view rest = std::string_view(name).substr(name.find('.', 7) + 1);
    const int64_t layer = std::stoll(name.substr(7, name.find('.', 7) - 7));
    if (std::optional<Tensor> mixer = mixers->part(name, layer, rest, t)) return mixer;
    if (rest == "wq_gate") return rows(t, first_head * head_dim, heads * head_dim);  // Qwen3.5's output gate
    if (rest == "wq" || rest == "bq") return rows(t, first_head * head_dim, heads * head_dim);
    if (rest == "wk" || rest == "bk" || rest == "wv" || rest == "bv")
      return rows(t, first_kv_head * head_dim, kv_heads * head_dim);
    if (rest == "wo") return columns(name, t, first_head * head_dim, heads * head_dim);
    if (rest == "w_gate" || rest == "w_up") return rows(t, rank * ff, ff);
    if (rest == "w_down") return columns(name, t, rank * ff, ff);
    if (rest.starts_with("experts.")) {
      const std::string_view expert = rest.substr(8);
      const int64_t e = std::stoll(std::string(expert.substr(0, expert.find('.'))));
      const std::string_view w = expert.substr(expert.find('.') + 1);
      if (expert_parallel) {
        if (e < experts.begin || e >= experts.end) return std::nullopt;
        return t;
      }
      return w == "w_down" ? columns(name, t, rank * moe_ff, moe_ff) : rows(t, rank * moe_ff, moe_ff);
    }
    return t;  // norms, q/k norms, the router: every rank needs them whole
  }
};

void check_divides(int ranks, int64_t n, const char* what, const std::string& model) {
  if (n % ranks != 0)
    fail("--tensor-parallel-size {}: {} has {} {}, which do not divide among {} ranks", ranks, model, n, what, ranks);
}

}  // namespace

ModelWeights shard_weights(const ModelWeights& full, int rank, int ranks, bool expert_parallel) {
  const ModelConfig& c = full.config;
  if (full.quant.enabled())
    fail(
        "--tensor-parallel-size {}: {} holds int8 weights quantized ahead of time; tensor parallel splits float and "
        "GGUF weights (quantize at load with --quantization instead)",
        ranks, full.path);
  if (c.qk_norm_full_width)
    fail(
        "--tensor-parallel-size {}: {} ({}) norms q and k over all heads at once, which a rank holding some of the "
        "heads cannot do; run it on one rank",
        ranks, full.path, c.arch_name());
  if (c.attention_sinks || c.moe_bias)
    fail(
        "--tensor-parallel-size {}: {} ({}) has attention sinks and expert biases, which minfer does not split among "
        "ranks yet; run it on one rank",
        ranks, full.path, c.arch_name());
  check_divides(ranks, c.num_heads, "attention heads", full.path);
  if (c.num_kv_heads >= ranks ? c.num_kv_heads % ranks != 0 : ranks % c.num_kv_heads != 0)
    fail("--tensor-parallel-size {}: {} has {} KV heads: the ranks must divide them, or they the ranks", ranks,
         full.path, c.num_kv_heads);
  bool dense_layers = false;
  for (int64_t i = 0; i < c.num_layers; ++i) dense_layers |= !c.is_moe(i);
  if (dense_layers) check_divides(ranks, c.intermediate_size, "MLP columns (intermediate_size)", full.path);
  if (expert_parallel && c.num_experts == 0)
    fail("--enable-expert-parallel needs a mixture-of-experts model; {} has no experts", full.path);
  if (c.num_experts > 0 && !expert_parallel)
    check_divides(ranks, c.moe_intermediate_size, "expert MLP columns (moe_intermediate_size)", full.path);
  const int64_t stride = (c.vocab_size + ranks - 1) / ranks;
  if (stride * (ranks - 1) >= c.vocab_size)
    fail("--tensor-parallel-size {}: the vocabulary of {} tokens is too small to split", ranks, c.vocab_size);

  const MixerShard mixers(c, rank, ranks);
  Split s{.rank = rank, .ranks = ranks, .expert_parallel = expert_parallel, .head_dim = c.head_dim};
  s.mixers = &mixers;
  s.heads = c.num_heads / ranks;
  s.first_head = rank * s.heads;
  s.kv_heads = std::max<int64_t>(1, c.num_kv_heads / ranks);
  s.first_kv_head = c.num_kv_heads >= ranks ? rank * s.kv_heads : rank * c.num_kv_heads / ranks;
  s.ff = dense_layers ? c.intermediate_size / ranks : c.intermediate_size;
  s.moe_ff = expert_parallel ? c.moe_intermediate_size : c.moe_intermediate_size / ranks;
  s.vocab_begin = rank * stride;
  s.vocab_end = std::min(c.vocab_size, s.vocab_begin + stride);
  if (expert_parallel) s.experts = dist::expert_range(c.num_experts, rank, ranks);

  ModelWeights out;
  out.format = full.format;
  out.path = full.path;
  out.tokenizer = full.tokenizer;
  out.quant = full.quant;
  out.config = c;
  out.config.num_heads = s.heads;
  out.config.num_kv_heads = s.kv_heads;
  out.config.intermediate_size = s.ff;
  out.config.moe_intermediate_size = s.moe_ff;
  mixers.shrink(out.config);
  out.shard = WeightShard{.rank = rank,
                          .size = ranks,
                          .expert_parallel = expert_parallel,
                          .vocab_begin = s.vocab_begin,
                          .vocab_stride = stride,
                          .expert_begin = s.experts.begin,
                          .expert_end = s.experts.end};
  for (const auto& [name, t] : full.tensors) {
    if (std::optional<Tensor> part = s.part(name, t)) out.tensors.emplace(name, std::move(*part));
  }
  return out;
}

}  // namespace minfer
