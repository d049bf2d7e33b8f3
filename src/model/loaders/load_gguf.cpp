// GGUF file: metadata -> config, blk.N.* tensors -> canonical names, the file itself as the tokenizer source.
#include <cstring>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "model/config_gguf.h"
#include "model/families/family.h"
#include "model/loaders/loaders.h"
#include "model/loaders/weight_check.h"

namespace minfer {

ModelWeights load_gguf_checkpoint(const std::string& path) {
  const auto gguf = GgufFile::open(path);
  ModelWeights w;
  w.format = CheckpointFormat::kGguf;
  w.path = path;
  w.config = read_gguf_config(*gguf);

  std::map<std::string, WeightOrigin> origins;
  for (const GgufTensorInfo& info : gguf->tensors()) {
    if (info.name == "rope_freqs.weight") {
      // llama.cpp's converter stores Llama 3 RoPE scaling as per-frequency divisors.
      const Tensor t = gguf->tensor(info);
      if (t.dtype != DType::F32 || t.rank() != 1 || t.dim(0) != w.config.rotary_dims() / 2)
        fail_load(path, "tensor 'rope_freqs.weight' must be f32 [{}], got {} {}", w.config.rotary_dims() / 2,
                  dtype_name(t.dtype), t.shape_string());
      w.config.rope_scaling.freq_factors.assign(t.as<float>(), t.as<float>() + t.dim(0));
      continue;
    }
    // Phi-3's longrope divisors, read with the config (read_gguf_config).
    if (info.name == "rope_factors_long.weight" || info.name == "rope_factors_short.weight") continue;
    const auto canonical = gguf_to_canonical(info.name, w.config.arch, w.config.num_layers);
    if (!canonical)
      fail_load(path, "unexpected tensor '{}' (not a weight of a {} model)", info.name, w.config.arch_name());
    if (w.tensors.count(*canonical)) fail_load(path, "duplicate tensor '{}'", info.name);
    w.tensors[*canonical] = gguf->tensor(info);
    origins[*canonical] = {path, info.name};
  }
  w.config.validate(path);
  split_fused_projections(w, origins);
  if (const auto adapt = family_of(w.config).adapt_weights) adapt(w);
  check_weights(w, origins, path,
                [&c = w.config](const std::string& n) { return canonical_to_gguf(n, c.arch, c.num_layers); });
  if (gguf->has("tokenizer.ggml.model")) w.tokenizer.gguf_path = path;
  return w;
}

}  // namespace minfer
