// Reader for llama2.c checkpoints (Karpathy's run.c "legacy" format, version 0): a header of 7 int32
//   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: unshared classifier), seq_len
// then f32 weights in this order, each layer-major where stacked:
//   token_embedding [vocab, dim], rms_att [layers, dim], wq [layers, heads*hs, dim], wk, wv [layers, kv*hs, dim],
//   wo [layers, dim, heads*hs], rms_ffn [layers, dim], w1 [layers, hidden, dim], w2 [layers, dim, hidden],
//   w3 [layers, hidden, dim], rms_final [dim], freq_cis_real, freq_cis_imag [seq_len, hs/2] (unused),
//   wcls [vocab, dim] (only when unshared).
// The file size must match the header exactly; the weights are viewed in place in the memory map.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/mapped_file.h"
#include "tensor/tensor.h"

namespace minfer {

struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // absolute value
  int32_t seq_len = 0;
  bool shared_classifier = true;  // the header's vocab_size was positive
  int32_t head_size() const { return dim / n_heads; }
};

class Llama2cFile {
 public:
  static constexpr size_t kHeaderBytes = 7 * 4;

  // Throws LoadError naming the file: a header that is not a plausible llama2.c header, or a size that does
  // not match it (truncated, or a newer llama2.c export version).
  static std::shared_ptr<Llama2cFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const Llama2cHeader& header() const { return header_; }
  // The weights under llama2.c's names (token_embedding, rms_att, wq, ..., rms_final, wcls when unshared),
  // stacked per layer as in the file, e.g. wq [n_layers, heads*hs, dim]. All f32 views into the map.
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Layer `layer` of a stacked tensor (its first dimension dropped), a view into the map.
  Tensor layer_slice(const std::string& name, int64_t layer) const;

 private:
  explicit Llama2cFile(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}
  void parse();

  std::shared_ptr<MappedFile> file_;
  Llama2cHeader header_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace minfer
