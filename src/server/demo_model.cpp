#include "server/demo_model.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "model/test_model_writer.h"

namespace minfer::server {

DemoModel::DemoModel() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/minfer-demo-model-XXXXXX";
  if (!mkdtemp(pattern.data())) fail("cannot create a temporary directory for the demo model ({})", pattern);
  dir_ = pattern;
  TestModelOptions o;
  o.preset = "tiny-qwen2";
  o.out_dir = dir_;
  o.dtype = DType::F32;
  o.seed = 0;
  try {
    write_test_model(o);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

DemoModel::~DemoModel() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace minfer::server
