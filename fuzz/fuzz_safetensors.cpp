// The safetensors reader (formats/safetensors_file) on arbitrary bytes: open, view every tensor.
#include "base/error.h"
#include "formats/safetensors_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = minfer::fuzz::write_input(data, size, "safetensors");
  try {
    const auto file = minfer::SafetensorsFile::open(path);
    for (const auto& t : file->tensors()) {
      try {
        (void)file->tensor(t);
      } catch (const minfer::Error&) {
      }
    }
  } catch (const minfer::Error&) {
  }
  return 0;
}
