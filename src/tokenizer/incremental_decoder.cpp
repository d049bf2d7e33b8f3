// Streaming decode: every token's bytes go through the same UTF-8 repair as decode(), which only ever holds
// back the bytes of a character that is still incomplete, so the pieces add up to the full decode.
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer {

std::string IncrementalDecoder::push(int32_t id) {
  tokenizer_.decode_piece(id, skip_special_, state_, pending_);
  std::string out;
  const size_t used = unicode::append_sanitized(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  unicode::append_sanitized(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace minfer
