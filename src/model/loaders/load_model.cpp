// load_model: picks the loader by what the path is. ModelWeights' accessors.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "model/loaders/loaders.h"
#include "model/model_weights.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

// The loader for what the path is.
ModelWeights load_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail_load(path, "no such file or directory");
  if (fs::is_directory(st)) {
    if (!fs::is_regular_file(fs::path(path) / "config.json"))
      fail_load(path,
                "missing config.json: not a Hugging Face model directory (expected config.json and "
                "model.safetensors; or give a .gguf or llama2.c .bin file)");
    return load_hf_checkpoint(path);
  }
  // A file inside a Hugging Face directory (config.json, a shard, the index) stands for its directory.
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string name = p.filename().string();
  const bool hf_file =
      name == "config.json" || p.extension() == ".safetensors" || name == "model.safetensors.index.json";
  if (hf_file) {
    if (!fs::is_regular_file(dir / "config.json"))
      fail_load(path, "missing config.json beside it (a Hugging Face checkpoint is loaded from its directory)");
    return load_hf_checkpoint(dir.string());
  }
  if (starts_with_gguf_magic(path)) return load_gguf_checkpoint(path);
  return load_llama2c_checkpoint(path);
}

}  // namespace

ModelWeights load_model(const std::string& path) {
  ModelWeights w = load_checkpoint(path);
  fold_output_scales(w);  // after every format's loader: the weights are in canonical names by now
  return w;
}

const Tensor* ModelWeights::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const Tensor& ModelWeights::get(const std::string& name) const {
  const Tensor* t = find(name);
  if (t == nullptr) fail("{}: the model has no weight '{}'", path, name);
  return *t;
}

}  // namespace minfer
