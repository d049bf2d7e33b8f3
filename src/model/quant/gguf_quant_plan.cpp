#include "model/quant/gguf_quant_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace minfer {
namespace {

struct FileTypeName {
  GgufFileType type;
  const char* name;
  DType base;  // the type of the mix's ordinary matrices
};
constexpr FileTypeName kFileTypes[] = {
    {GgufFileType::kQ4_0, "Q4_0", DType::Q4_0},     {GgufFileType::kQ4_K_M, "Q4_K_M", DType::Q4_K},
    {GgufFileType::kQ5_K_M, "Q5_K_M", DType::Q5_K}, {GgufFileType::kQ6_K, "Q6_K", DType::Q6_K},
    {GgufFileType::kQ8_0, "Q8_0", DType::Q8_0},     {GgufFileType::kF16, "F16", DType::F16},
    {GgufFileType::kBF16, "BF16", DType::BF16},
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama.cpp's tensor_allows_quantization for the families minfer writes.
bool quantizable(const PlannedTensor& t) {
  return t.shape.size() >= 2 && ends_with(t.name, "weight") && !contains(t.name, "_norm.weight") &&
         !contains(t.name, "ffn_gate_inp.weight");
}

// The first and last eighth of the layers, and every third one between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's tensor_type_fallback: a type whose blocks do not fit the rows.
DType fallback(DType type, int64_t cols) {
  if (cols % dtype_block(type).elements == 0) return type;
  switch (type) {
    case DType::Q4_K: type = DType::Q5_0; break;
    case DType::Q5_K: type = DType::Q5_1; break;
    case DType::Q6_K: type = DType::Q8_0; break;
    default: break;
  }
  return cols % dtype_block(type).elements == 0 ? type : DType::F16;
}

}  // namespace

std::optional<GgufFileType> parse_gguf_file_type(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const FileTypeName& f : kFileTypes)
    if (upper == f.name) return f.type;
  return std::nullopt;
}

std::string_view gguf_file_type_name(GgufFileType type) {
  for (const FileTypeName& f : kFileTypes)
    if (f.type == type) return f.name;
  return "?";
}

std::string gguf_file_type_names() {
  std::string s;
  for (const FileTypeName& f : kFileTypes) {
    if (!s.empty()) s += '|';
    s += f.name;
  }
  return s;
}

bool gguf_quantize_before(const std::string& a, const std::string& b) {
  const int la = layer_of(a), lb = layer_of(b);
  return la != lb ? la < lb : a < b;
}

void plan_gguf_types(GgufFileType type, int64_t n_layers, std::vector<PlannedTensor>& tensors) {
  DType base = DType::Q8_0;
  for (const FileTypeName& f : kFileTypes)
    if (f.type == type) base = f.base;
  const bool k_mix = type == GgufFileType::kQ4_K_M || type == GgufFileType::kQ5_K_M;
  const bool tied = std::none_of(tensors.begin(), tensors.end(), [](auto& t) { return t.name == "output.weight"; });
  const int64_t n_attn_v =
      std::count_if(tensors.begin(), tensors.end(), [](auto& t) { return contains(t.name, "attn_v.weight"); });
  int64_t i_attn_v = 0, i_ffn_down = 0;
  for (PlannedTensor& t : tensors) {
    if (!quantizable(t)) continue;
    if (!is_block_type(base)) {  // F16 / BF16: no mix (llama.cpp mixes only quantized file types)
      t.target = base;
      continue;
    }
    const int64_t cols = t.shape.back();
    DType target = base;
    if (t.name == "output.weight" || (tied && t.name == "token_embd.weight")) {
      if (cols % dtype_block(base).elements != 0)
        target = DType::Q8_0;
      else if (base != DType::Q8_0)
        target = DType::Q6_K;
    } else if (t.name == "token_embd.weight") {
      // keeps the base type
    } else if (contains(t.name, "attn_v.weight")) {
      if (k_mix && use_more_bits(i_attn_v, n_attn_v)) target = DType::Q6_K;
      ++i_attn_v;
    } else if (contains(t.name, "ffn_down")) {
      if (k_mix && use_more_bits(i_ffn_down, n_layers)) target = DType::Q6_K;
      ++i_ffn_down;
    }
    t.target = fallback(target, cols);
  }
}

}  // namespace minfer
