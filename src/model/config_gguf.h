// ModelConfig from GGUF metadata ({arch}.* hyper-parameters and tokenizer.ggml.* special ids).
#pragma once

#include "formats/gguf_file.h"
#include "model/model_config.h"

namespace minfer {

// general.architecture must be llama or qwen2. Vocabulary size from tokenizer.ggml.tokens (else the rows of
// token_embd.weight); tied embeddings when there is no output.weight; q/k/v biases when blk.0.attn_q.bias exists
// (always for qwen2). rope_style: llama -> kInterleaved (llama.cpp's converter permutes HF Q/K rows into Meta's
// order), qwen2 -> kNeox. Validated; throws LoadError naming the file and the key.
ModelConfig read_gguf_config(const GgufFile& gguf);

}  // namespace minfer
