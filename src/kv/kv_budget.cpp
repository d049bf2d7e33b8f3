#include "kv/kv_budget.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace minfer {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

KvPoolPlan plan_kv_pool(const KvPoolRequest& r) {
  const int64_t per_page = r.shape.bytes_per_page();
  MINFER_CHECK(per_page > 0 && r.max_model_len > 0, "bad KV pool request");
  KvPoolPlan plan;
  plan.pages_per_max_seq = r.shape.page.pages_for(r.max_model_len);
  const int64_t affordable = r.budget_bytes / per_page;  // usable pages; the null page is extra
  if (affordable < plan.pages_per_max_seq) {
    const int64_t needed = (plan.pages_per_max_seq + 1) * per_page;
    const int64_t max_len_fits = std::max<int64_t>(0, affordable) * r.shape.page.size();
    fail(
        "the KV cache cannot hold one sequence of max_model_len={} tokens: that needs {:.1f} MiB ({} pages of {} "
        "tokens, {:.3f} MiB each: {} layers x {} KV heads x {} head_dim x K,V x {}) but the budget ({}) is "
        "{:.1f} MiB. Lower max_model_len (to at most {} with this budget), raise the KV budget "
        "(--kv-cache-memory / kv_cache_memory){}, or use a smaller model or quantization",
        r.max_model_len, mib(needed), plan.pages_per_max_seq + 1, r.shape.page.size(), mib(per_page),
        r.shape.num_layers, r.shape.kv_heads, r.shape.head_dim, kv_cache_dtype_name(r.shape.dtype), r.budget_source,
        mib(r.budget_bytes), max_len_fits,
        kv_code_bits(r.shape.dtype) <= 8       ? ""
        : r.shape.head_dim % kKvBlockDims == 0 ? ", store the KV cache quantized (--kv-cache-dtype q8_0, q4_0 or int8)"
                                               : ", store the KV cache quantized (--kv-cache-dtype int8 or fp8_e4m3)");
  }
  int64_t usable = affordable;
  if (r.max_useful_pages > 0) usable = std::min(usable, std::max(r.max_useful_pages, plan.pages_per_max_seq));
  // The budget includes the null page when it can; never let it push the pool below one sequence.
  if ((usable + 1) * per_page > r.budget_bytes && usable > plan.pages_per_max_seq) --usable;
  plan.num_pages = usable + 1;
  plan.bytes = plan.num_pages * per_page;
  return plan;
}

}  // namespace minfer
