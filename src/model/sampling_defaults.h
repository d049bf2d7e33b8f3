// The checkpoint's sampling defaults (minfer::SamplingDefaults): generation_config.json beside a Hugging Face
// checkpoint, or the general.sampling.* keys llama.cpp's converter writes into a GGUF file.
#pragma once

#include "minfer/sampling.h"
#include "model/model_weights.h"

namespace minfer {

// Throws LoadError naming the file for a malformed generation_config.json or a value of the wrong type.
SamplingDefaults read_sampling_defaults(const ModelWeights& weights);

}  // namespace minfer
