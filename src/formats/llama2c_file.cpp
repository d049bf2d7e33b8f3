#include "formats/llama2c_file.h"

#include <cstring>
#include <vector>

#include "base/error.h"

namespace minfer {
namespace {

// llama2.c's export.py writes this magic ("ak42") first in its version 1 and 2 formats.
constexpr uint32_t kExportMagic = 0x616b3432;

std::string describe(const Llama2cHeader& h) {
  return fmt::format("dim {}, hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}{}, seq_len {}",
                     h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size,
                     h.shared_classifier ? "" : " (unshared classifier)", h.seq_len);
}

// Why a header cannot be a llama2.c header, or empty. The bounds keep every size computation far from overflow.
std::string implausible(const Llama2cHeader& h) {
  auto out_of = [](int32_t v, int32_t hi) { return v <= 0 || v > hi; };
  if (out_of(h.dim, 1 << 18)) return "dim out of range";
  if (out_of(h.hidden_dim, 1 << 20)) return "hidden_dim out of range";
  if (out_of(h.n_layers, 4096)) return "n_layers out of range";
  if (out_of(h.n_heads, 4096)) return "n_heads out of range";
  if (out_of(h.n_kv_heads, h.n_heads)) return "n_kv_heads out of range";
  if (out_of(h.vocab_size, 1 << 22)) return "vocab_size out of range";
  if (out_of(h.seq_len, 1 << 24)) return "seq_len out of range";
  if (h.dim % h.n_heads != 0) return "n_heads does not divide dim";
  if (h.n_heads % h.n_kv_heads != 0) return "n_kv_heads does not divide n_heads";
  if (h.head_size() % 2 != 0) return "head size is odd";
  return "";
}

}  // namespace

std::shared_ptr<Llama2cFile> Llama2cFile::open(const std::string& path) {
  std::shared_ptr<Llama2cFile> f(new Llama2cFile(MappedFile::open(path)));
  f->parse();
  return f;
}

void Llama2cFile::parse() {
  const std::string& path = file_->path();
  const uint64_t size = file_->size();
  if (size < kHeaderBytes)
    fail_load(path, "truncated llama2.c checkpoint: {} bytes, but the header alone needs {}", size, kHeaderBytes);
  int32_t raw[7];
  std::memcpy(raw, file_->data(), sizeof(raw));
  if (static_cast<uint32_t>(raw[0]) == kExportMagic)
    fail_load(path,
              "llama2.c export version {} is not supported (only the legacy version 0 format: export.py "
              "--version 0)",
              raw[1]);
  Llama2cHeader& h = header_;
  h.dim = raw[0];
  h.hidden_dim = raw[1];
  h.n_layers = raw[2];
  h.n_heads = raw[3];
  h.n_kv_heads = raw[4];
  h.shared_classifier = raw[5] > 0;
  h.vocab_size = raw[5] == INT32_MIN ? 0 : (raw[5] > 0 ? raw[5] : -raw[5]);
  h.seq_len = raw[6];
  if (const std::string why = implausible(h); !why.empty())
    fail_load(path, "not a llama2.c checkpoint (nor a GGUF file or a Hugging Face directory): {} in header [{}]", why,
              describe(h));

  const int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers, vocab = h.vocab_size, hs = h.head_size();
  const int64_t q_dim = h.n_heads * hs, kv_dim = h.n_kv_heads * hs;
  struct Part {
    const char* name;
    std::vector<int64_t> shape;
  };
  std::vector<Part> parts = {
      {"token_embedding", {vocab, dim}},
      {"rms_att", {layers, dim}},
      {"wq", {layers, q_dim, dim}},
      {"wk", {layers, kv_dim, dim}},
      {"wv", {layers, kv_dim, dim}},
      {"wo", {layers, dim, q_dim}},
      {"rms_ffn", {layers, dim}},
      {"w1", {layers, hidden, dim}},
      {"w2", {layers, dim, hidden}},
      {"w3", {layers, hidden, dim}},
      {"rms_final", {dim}},
      {"freq_cis_real", {h.seq_len, hs / 2}},
      {"freq_cis_imag", {h.seq_len, hs / 2}},
  };
  if (!h.shared_classifier) parts.push_back({"wcls", {vocab, dim}});

  uint64_t expected = kHeaderBytes;
  for (const Part& p : parts) {
    uint64_t n = 1;
    for (int64_t d : p.shape) n *= static_cast<uint64_t>(d);
    expected += 4 * n;
  }
  if (size < expected)
    fail_load(path, "truncated llama2.c checkpoint: the header [{}] needs {} bytes, but the file has {}", describe(h),
              expected, size);
  if (size > expected)
    fail_load(path,
              "not a llama2.c legacy (version 0) checkpoint: {} bytes more than the header [{}] describes ({} bytes)",
              size - expected, describe(h), expected);

  uint64_t offset = kHeaderBytes;
  for (Part& p : parts) {
    Tensor t;
    t.dtype = DType::F32;
    t.shape = std::move(p.shape);
    t.data = file_->data() + offset;  // 28 + 4k: always 4-byte aligned in a page-aligned map
    t.owner = file_;
    offset += t.nbytes();
    if (std::strncmp(p.name, "freq_cis", 8) != 0) tensors_[p.name] = std::move(t);
  }
}

Tensor Llama2cFile::layer_slice(const std::string& name, int64_t layer) const {
  auto it = tensors_.find(name);
  MINFER_CHECK(it != tensors_.end(), "no llama2.c tensor '{}'", name);
  const Tensor& stacked = it->second;
  MINFER_CHECK(stacked.rank() >= 2 && layer >= 0 && layer < stacked.dim(0), "bad slice {} of '{}'", layer, name);
  Tensor t;
  t.dtype = stacked.dtype;
  t.shape.assign(stacked.shape.begin() + 1, stacked.shape.end());
  t.data = stacked.as<float>() + layer * t.numel();
  t.owner = stacked.owner;
  return t;
}

}  // namespace minfer
