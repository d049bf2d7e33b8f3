// `minfer quantize IN OUT.gguf --type T`: a model (Hugging Face directory or GGUF file) written as a GGUF file of
// llama.cpp's quantization mix T (model/quant/gguf_quant_plan.h), with the metadata llama.cpp needs to load it.
//   from GGUF   every metadata key is copied (general.file_type set to T); tensors are dequantized to f32 and
//               rounded again (llama-quantize --allow-requantize)
//   from HF     config.json becomes llama.cpp's {arch}.* keys and tokenizer.json its tokenizer.ggml.* keys
//               (tokenizer/gguf_vocab_export.h); Llama's q/k rows are permuted into llama.cpp's rotary order
//               (its converter's permute); Llama 3 rope scaling becomes rope_freqs.weight
// Tensors are written in llama.cpp's order, each rounded by the reference quantizers
// (model/quant/gguf_block_quantizer.h) on all threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/quant/gguf_quant_plan.h"
#include "model/quant/quantize_model.h"

namespace minfer {

struct GgufExportResult {
  size_t tensors = 0;
  uint64_t bytes = 0;                // tensor bytes written
  std::map<std::string, int> types;  // tensors per GGUF type name
};

// Throws LoadError naming the input (file, tensor and problem) or Error naming the output on failure; the output
// path is only created once the file is complete.
GgufExportResult write_quantized_gguf(const std::string& in, const std::string& out, GgufFileType type, int threads,
                                      const QuantProgress& progress = {});

}  // namespace minfer
