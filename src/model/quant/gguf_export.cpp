#include "model/quant/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "formats/gguf_file.h"
#include "formats/gguf_writer.h"
#include "kernels/quant.h"
#include "model/families/family.h"
#include "model/loaders/loaders.h"
#include "model/model_weights.h"
#include "model/quant/gguf_block_quantizer.h"
#include "tokenizer/gguf_vocab_export.h"

namespace minfer {
namespace {

struct SourceTensor {
  PlannedTensor plan;
  Tensor data;
  // Experts stacked into one GGUF tensor [experts, rows, cols]: each expert's matrix, in order (data is the first).
  std::vector<Tensor> stacked;
  DType keep = DType::F32;  // the type when the plan leaves the tensor unquantized
  int64_t rope_heads = 0;   // > 0: rows permuted from HF's rotary order into llama.cpp's, per head
};

struct Source {
  std::shared_ptr<GgufFile> gguf;  // keeps a GGUF input mapped
  ModelWeights hf;                 // keeps a Hugging Face input mapped
  int64_t n_layers = 0;
  std::vector<SourceTensor> tensors;
};

bool skipped_key(const std::string& key) {
  return key == "general.alignment" || key == "general.file_type" || key == "general.quantization_version" ||
         key.rfind("split.", 0) == 0;
}

Source read_gguf(const std::string& path, GgufWriter& writer) {
  Source s;
  s.gguf = GgufFile::open(path);
  for (const auto& [key, value] : s.gguf->metadata())
    if (!skipped_key(key)) writer.set_copy(key, value);
  const std::string arch = s.gguf->get_string("general.architecture");
  s.n_layers = s.gguf->get_int(arch + ".block_count");
  for (const GgufTensorInfo& info : s.gguf->tensors()) {
    SourceTensor t;
    t.plan = {info.name, info.shape, std::nullopt};
    t.data = s.gguf->tensor(info);  // names the file and tensor for a type minfer does not read
    t.keep = t.data.dtype;
    s.tensors.push_back(std::move(t));
  }
  return s;
}

// The family's GGUF form, or its refusal naming the architecture, before any file is written.
const GgufExport& gguf_export_of(const ModelWeights& w) {
  const GgufExport& e = family_of(w.config).gguf_export;
  if (e.arch == nullptr) fail_load(w.path, "cannot write architecture '{}' as GGUF: {}", w.config.arch, e.refusal);
  return e;
}

// RoPE scaling as llama.cpp's reader takes it: linear as a factor; YaRN as a factor and the original context with
// its default betas and attention factor (it reads neither from the file for most architectures); longrope's
// attention factor and original context (its factors, and Llama 3's, are tensors: add_rope_tensors).
void write_rope_scaling(const ModelWeights& w, const GgufExport& e, const std::string& arch, GgufWriter& writer) {
  const RopeScaling& s = w.config.rope_scaling;
  if (s.type == "none" || s.type == "llama3") return;
  // longrope's factors are tensors (add_rope_tensors); llama.cpp scales cos and sin by its attn_factor.
  if (s.type == "longrope") {
    writer.set_f32(arch + ".rope.scaling.attn_factor", static_cast<float>(s.attention_factor));
    writer.set_u32(arch + ".rope.scaling.original_context_length",
                   static_cast<uint32_t>(s.original_max_position_embeddings));
    return;
  }
  if (s.type == "linear") {
    writer.set_string(arch + ".rope.scaling.type", "linear");
    writer.set_f32(arch + ".rope.scaling.factor", static_cast<float>(s.factor));
    return;
  }
  const double default_attention = s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
  if (s.type != "yarn" || s.beta_fast != 32.0 || s.beta_slow != 1.0 || (!s.truncate && !e.yarn_as_llamacpp) ||
      std::abs(s.attention_factor / default_attention - 1.0) > 1e-6)
    fail_load(w.path,
              "cannot write rope_scaling '{}' as GGUF (llama.cpp reads linear, llama3, and yarn with beta_fast 32, "
              "beta_slow 1, truncate and its default attention factor)",
              s.type);
  writer.set_string(arch + ".rope.scaling.type", "yarn");
  writer.set_f32(arch + ".rope.scaling.factor", static_cast<float>(s.factor));
  writer.set_u32(arch + ".rope.scaling.original_context_length",
                 static_cast<uint32_t>(s.original_max_position_embeddings));
}

void write_expert_keys(const ModelConfig& c, const std::string& arch, const std::string& path, GgufWriter& writer) {
  if (c.num_experts == 0) return;
  if (!c.layer_dense.empty() || !c.norm_topk_prob)
    fail_load(path,
              "cannot write {} as GGUF: llama.cpp's experts are on every layer and renormalised over the "
              "chosen ones (mlp_only_layers, decoder_sparse_step, norm_topk_prob)",
              c.arch);
  writer.set_u32(arch + ".expert_count", static_cast<uint32_t>(c.num_experts));
  writer.set_u32(arch + ".expert_used_count", static_cast<uint32_t>(c.num_experts_per_tok));
  writer.set_u32(arch + ".expert_feed_forward_length", static_cast<uint32_t>(c.moe_intermediate_size));
}

void write_hf_config(const ModelWeights& w, const GgufExport& e, GgufWriter& writer) {
  const ModelConfig& c = w.config;
  const std::string arch = e.arch;
  writer.set_string("general.architecture", arch);
  std::filesystem::path dir = std::filesystem::path(w.path).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "model/" names "model"
  writer.set_string("general.name", dir.filename().string());
  writer.set_u32(arch + ".block_count", static_cast<uint32_t>(c.num_layers));
  writer.set_u32(arch + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  writer.set_u32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  writer.set_u32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  writer.set_u32(arch + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  writer.set_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  writer.set_f32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  writer.set_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  writer.set_u32(arch + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
  writer.set_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.rotary_dims()));
  if (c.head_dim * c.num_heads != c.hidden_size) {
    writer.set_u32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
    writer.set_u32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  write_rope_scaling(w, e, arch, writer);
  write_expert_keys(c, arch, w.path, writer);
  if (e.write_keys) e.write_keys(c, w.path, writer);
}

void write_hf_vocab(const ModelWeights& w, GgufWriter& writer) {
  if (w.tokenizer.hf_tokenizer_json.empty()) fail_load(w.path, "no tokenizer.json to write the GGUF vocabulary from");
  const GgufVocab v =
      gguf_vocab_from_hf(w.tokenizer.hf_tokenizer_json, w.tokenizer.hf_tokenizer_config_json, w.config.vocab_size);
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", v.pre);
  writer.set_string_array("tokenizer.ggml.tokens", v.tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  writer.set_string_array("tokenizer.ggml.merges", v.merges);
  if (v.bos) writer.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*v.bos));
  if (v.eos) writer.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*v.eos));
  if (v.pad) writer.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*v.pad));
  if (v.add_bos) writer.set_bool("tokenizer.ggml.add_bos_token", *v.add_bos);
  if (!v.chat_template.empty()) writer.set_string("tokenizer.chat_template", v.chat_template);
}

// Llama 3 rope scaling as llama.cpp's converter stores it: per-frequency divisors of the base inverse frequencies.
Tensor rope_freq_factors(const ModelConfig& c) {
  ModelConfig unscaled = c;
  unscaled.rope_scaling = RopeScaling{};
  const std::vector<float> base = unscaled.rope_inv_freq(), scaled = c.rope_inv_freq();
  Tensor t = Tensor::allocate(DType::F32, {static_cast<int64_t>(base.size())});
  for (size_t i = 0; i < base.size(); ++i) t.mutable_as<float>()[i] = base[i] / scaled[i];
  return t;
}

// "layers.{i}.experts.{j}.<matrix>": one expert's matrix, which GGUF holds in its projection's stacked tensor.
bool is_expert_weight(const std::string& canonical) { return canonical.find(".experts.") != std::string::npos; }

// Each MoE layer's experts as llama.cpp stacks them: blk.{i}.ffn_{gate,up,down}_exps.weight [experts, rows, cols],
// and their biases where they have them (gpt-oss) as .bias [experts, n] in f32.
void add_stacked_experts(const ModelWeights& w, Source& s) {
  const ModelConfig& c = w.config;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.is_moe(i)) continue;
    const std::string p = "layers." + std::to_string(i) + ".experts.";
    for (const char* part : {"w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down"}) {
      const bool bias = part[0] == 'b';
      if (bias && !c.moe_bias) continue;
      SourceTensor t;
      for (int64_t e = 0; e < c.num_experts; ++e) t.stacked.push_back(w.get(p + std::to_string(e) + "." + part));
      t.data = t.stacked.front();
      t.keep = bias ? DType::F32 : t.data.dtype;
      const std::vector<int64_t> shape = bias ? std::vector<int64_t>{c.num_experts, t.data.dim(0)}
                                              : std::vector<int64_t>{c.num_experts, t.data.dim(0), t.data.dim(1)};
      t.plan = {canonical_to_gguf(p + part, c.arch), shape, std::nullopt};
      s.tensors.push_back(std::move(t));
    }
  }
}

// A part of a projection the family's GGUF stores fused (Phi-3's gate and up: ffn_up holds both).
bool is_fused_part(const std::string& canonical, const GgufExport& e) {
  for (const FusedWeight& f : e.fused)
    if (canonical.ends_with(std::string(".") + f.first) || canonical.ends_with(std::string(".") + f.second))
      return true;
  return false;
}

void add_fused_projections(const ModelWeights& w, const GgufExport& e, Source& s) {
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const FusedWeight& f : e.fused) {
      SourceTensor t;
      t.stacked = {w.get(p + f.first), w.get(p + f.second)};
      t.data = t.stacked.front();
      t.keep = t.data.dtype;
      t.plan = {canonical_to_gguf(p + f.fused, w.config.arch),
                {t.data.dim(0) + t.stacked.back().dim(0), t.data.dim(1)},
                std::nullopt};
      s.tensors.push_back(std::move(t));
    }
  }
}

// RoPE scaling that llama.cpp's converter stores as tensors: Llama 3's as rope_freqs.weight, longrope's as its long
// and short factors.
void add_rope_tensors(const ModelConfig& c, Source& s) {
  auto add = [&](const char* name, Tensor data) {
    SourceTensor t;
    t.data = std::move(data);
    t.plan = {name, t.data.shape, std::nullopt};
    s.tensors.push_back(std::move(t));
  };
  auto vector = [](const std::vector<float>& v) {
    Tensor t = Tensor::allocate(DType::F32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.mutable_as<float>());
    return t;
  };
  if (c.rope_scaling.type == "llama3") add("rope_freqs.weight", rope_freq_factors(c));
  if (c.rope_scaling.type != "longrope") return;
  add("rope_factors_long.weight", vector(c.rope_scaling.long_factor));
  add("rope_factors_short.weight", vector(c.rope_scaling.short_factor));
}

Source read_hf(const std::string& path, GgufWriter& writer) {
  Source s;
  s.hf = load_model(path);
  const ModelWeights& w = s.hf;
  if (w.quant.enabled()) fail_load(path, "already int8-quantized; quantize the float checkpoint instead");
  const GgufExport& e = gguf_export_of(w);
  write_hf_config(w, e, writer);
  write_hf_vocab(w, writer);
  s.n_layers = w.config.num_layers;
  for (const auto& [canonical, tensor] : w.tensors) {
    if (is_expert_weight(canonical) || is_fused_part(canonical, e)) continue;  // stacked or fused below
    SourceTensor t;
    t.plan = {canonical_to_gguf(canonical, w.config.arch), tensor.shape, std::nullopt};
    t.data = tensor;
    t.keep = tensor.rank() == 1 ? DType::F32 : tensor.dtype;  // vectors widened, as llama.cpp's converter does
    if (e.interleave_qk) {
      const bool q = canonical.ends_with(".wq"), k = canonical.ends_with(".wk");
      if (q || k) t.rope_heads = q ? w.config.num_heads : w.config.num_kv_heads;
    }
    s.tensors.push_back(std::move(t));
  }
  add_stacked_experts(w, s);
  add_fused_projections(w, e, s);
  add_rope_tensors(w.config, s);
  return s;
}

// Row `row` of `matrix` (a tensor viewed as [rows, cols]) as f32.
void row_to_f32(const Tensor& matrix, int64_t row, float* out) {
  const int64_t cols = matrix.dim(1);
  if (is_block_type(matrix.dtype)) {
    kernels::dequantize_rows(matrix, row, 1, out);
    return;
  }
  const int64_t first = row * cols;
  for (int64_t i = 0; i < cols; ++i) {
    switch (matrix.dtype) {
      case DType::F32: out[i] = matrix.as<float>()[first + i]; break;
      case DType::F16: out[i] = f16_to_f32(matrix.as<uint16_t>()[first + i]); break;
      case DType::BF16: out[i] = bf16_to_f32(matrix.as<uint16_t>()[first + i]); break;
      default: fail("tensor of type {} cannot be converted", dtype_name(matrix.dtype));
    }
  }
}

// HF's rotary order (per head: the first halves of the pairs, then the second halves) to llama.cpp's (pairs
// adjacent): HF row h*d + s*d/2 + i goes to row h*d + 2i + s.
int64_t rope_source_row(int64_t row, int64_t rows, int64_t heads) {
  const int64_t d = rows / heads, h = row / d, r = row % d;
  return h * d + (r % 2) * (d / 2) + r / 2;
}

void fill_tensor(const SourceTensor& t, DType target, std::span<uint8_t> out, ThreadPool& pool) {
  // The tensor's parts (one unless stacked or fused), each as the rows its last dimension makes.
  std::vector<Tensor> parts = t.stacked.empty() ? std::vector<Tensor>{t.data} : t.stacked;
  if (!t.plan.target && t.keep == t.data.dtype && t.rope_heads == 0) {
    size_t at = 0;
    for (const Tensor& part : parts) {
      std::copy_n(static_cast<const uint8_t*>(part.data), part.nbytes(), out.begin() + static_cast<ptrdiff_t>(at));
      at += part.nbytes();
    }
    return;
  }
  const int64_t cols = t.data.shape.back(), part_rows = t.data.numel() / cols;
  const int64_t rows = part_rows * static_cast<int64_t>(parts.size());
  const size_t row_bytes = dtype_bytes(target, static_cast<size_t>(cols));
  for (Tensor& part : parts) part.shape = {part_rows, cols};
  pool.parallel_for(static_cast<size_t>(rows), 16, [&](size_t begin, size_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (size_t r = begin; r < end; ++r) {
      const int64_t source =
          t.rope_heads ? rope_source_row(static_cast<int64_t>(r), rows, t.rope_heads) : static_cast<int64_t>(r);
      row_to_f32(parts[static_cast<size_t>(source / part_rows)], source % part_rows, row.data());
      quantize_gguf_row(target, row.data(), cols, out.data() + r * row_bytes);
    }
  });
}

}  // namespace

GgufExportResult write_quantized_gguf(const std::string& in, const std::string& out, GgufFileType type, int threads,
                                      const QuantProgress& progress) {
  GgufWriter writer;
  Source s = std::filesystem::is_directory(in) ? read_hf(in, writer) : read_gguf(in, writer);
  writer.set_u32("general.quantization_version", 2);
  writer.set_u32("general.file_type", static_cast<uint32_t>(type));
  std::sort(s.tensors.begin(), s.tensors.end(), [](const SourceTensor& a, const SourceTensor& b) {
    return gguf_quantize_before(a.plan.name, b.plan.name);
  });
  std::vector<PlannedTensor> plan;
  for (const SourceTensor& t : s.tensors) plan.push_back(t.plan);
  plan_gguf_types(type, s.n_layers, plan);
  GgufExportResult result;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    s.tensors[i].plan.target = plan[i].target;
    const DType dtype = plan[i].target.value_or(s.tensors[i].keep);
    writer.add_tensor(plan[i].name, plan[i].shape, dtype);
    result.types[std::string(dtype_name(dtype))]++;
    result.bytes += writer.tensor_bytes(i);
  }
  result.tensors = s.tensors.size();
  ThreadPool pool(threads);
  writer.write(out, [&](size_t i, std::span<uint8_t> bytes) {
    const SourceTensor& t = s.tensors[i];
    fill_tensor(t, t.plan.target.value_or(t.keep), bytes, pool);
    if (progress) progress(i + 1, s.tensors.size(), t.plan.name);
  });
  return result;
}

}  // namespace minfer
