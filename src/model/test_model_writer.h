// Writes a test model in the exact Hugging Face layout of a real checkpoint, with seeded random weights:
// config.json and generation_config.json as the real model's, model.safetensors (or shards + index),
// tokenizer.json and tokenizer_config.json. Used by `minfer make-test-model`, the tests and the benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace minfer {

struct TestModelOptions {
  // A preset of test_model_presets(): real shapes (qwen2.5-0.5b, llama-3.2-1b, gemma3-270m, ...) or tiny ones.
  std::string preset;
  std::string out_dir;        // created if missing; an earlier model*.safetensors / index there is replaced
  DType dtype = DType::BF16;  // F32 or BF16
  uint64_t seed = 0;
  // Optional: copy this tokenizer.json (and the tokenizer_config.json beside it, if any) instead of generating a
  // small byte-level BPE one. The real presets keep their vocab size (the tokenizer must fit in it); the tiny
  // presets take the tokenizer's size as their vocab size.
  std::string tokenizer_json;
  uint64_t shard_bytes = 0;  // 0: one model.safetensors; else shards of at most this many data bytes
  // Writes full-size but sparse, all-zero weight files without generating data (for tests of the layout).
  bool skip_weight_data = false;
  // Gemma 3: the local layers' window instead of the preset's (e.g. small enough that short tests run past it).
  int64_t sliding_window = 0;
  // The preset's first `layers` layers only (0: all): a real shape's layers on a machine without room for them all.
  int64_t layers = 0;
};

struct TestModelResult {
  std::vector<std::string> files;  // names written in out_dir
  int64_t vocab_size = 0;
  uint64_t parameters = 0;
  uint64_t weight_bytes = 0;
};

std::vector<std::string> test_model_presets();
// The preset's own torch_dtype: bf16 for the real shapes, f32 for the tiny ones.
DType default_test_model_dtype(const std::string& preset);
// Throws Error naming the problem (unknown preset, unsupported dtype, unreadable tokenizer, I/O failure).
TestModelResult write_test_model(const TestModelOptions& options);

}  // namespace minfer
