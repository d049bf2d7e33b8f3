// llama2.c's two formats on arbitrary bytes: the checkpoint reader (formats/llama2c_file) and the tokenizer .bin.
#include "base/error.h"
#include "formats/llama2c_file.h"
#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = minfer::fuzz::write_input(data, size, "bin");
  try {
    (void)minfer::Llama2cFile::open(path);
  } catch (const minfer::Error&) {
  }
  try {
    const auto tokenizer = minfer::tokenizer_from_llama2c(path);
    (void)tokenizer->decode(tokenizer->encode("Once upon a time"), false);
  } catch (const minfer::Error&) {
  }
  return 0;
}
