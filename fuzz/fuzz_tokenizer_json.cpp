// tokenizer.json (Hugging Face tokenizers: BPE, byte-level, normalizers, pre-tokenizers, added tokens) on arbitrary
// bytes: load, then encode and decode a mixed string.
#include "base/error.h"
#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = minfer::fuzz::write_input(data, size, "json");
  try {
    const auto tokenizer = minfer::tokenizer_from_hf_json(path);
    (void)tokenizer->decode(tokenizer->encode("Hello, world!  <|im_start|>x \xe4\xbd\xa0 \xf0\x9f\x98\x80 42"), false);
  } catch (const minfer::Error&) {
  }
  return 0;
}
