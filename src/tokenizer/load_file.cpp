// tokenizer_from_file: picks the loader from what the file is.
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

std::unique_ptr<Tokenizer> tokenizer_from_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path json = fs::path(path) / "tokenizer.json";
    if (!fs::exists(json, ec)) fail_load(path, "directory has no tokenizer.json");
    return tokenizer_from_file(json.string());
  }
  if (!fs::exists(path, ec)) fail_load(path, "no such file");
  if (fs::path(path).extension() == ".json") {
    const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
    return tokenizer_from_hf_json(path, fs::exists(config, ec) ? config.string() : "");
  }
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_load(path, "cannot open");
  in.read(magic, sizeof(magic));
  if (in.gcount() == 4 && std::string_view(magic, 4) == "GGUF") return tokenizer_from_gguf(*GgufFile::open(path));
  return tokenizer_from_llama2c(path);
}

}  // namespace minfer
