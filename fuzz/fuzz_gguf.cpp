// The GGUF reader (formats/gguf_file) and the GGUF vocabularies (tokenizer.ggml.*: SentencePiece and byte-level BPE)
// on arbitrary bytes: open, read every tensor's view, build the tokenizer, round-trip a string.
#include "base/error.h"
#include "formats/gguf_file.h"
#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = minfer::fuzz::write_input(data, size, "gguf");
  std::shared_ptr<minfer::GgufFile> gguf;
  try {
    gguf = minfer::GgufFile::open(path);
  } catch (const minfer::Error&) {
    return 0;
  }
  for (const minfer::GgufTensorInfo& t : gguf->tensors()) {
    try {
      (void)gguf->tensor(t);
    } catch (const minfer::Error&) {
    }
  }
  try {
    const auto tokenizer = minfer::tokenizer_from_gguf(*gguf);
    (void)tokenizer->decode(tokenizer->encode("Hello, world! 123 \xe4\xbd\xa0\xe5\xa5\xbd"), false);
  } catch (const minfer::Error&) {
  }
  return 0;
}
