// Tokens and log-probabilities as the OpenAI API spells them: the chat shape ({"content": [{token, logprob,
// bytes, top_logprobs}]}) and the legacy completions shape (parallel arrays tokens / token_logprobs /
// top_logprobs / text_offset). A token's text is its bytes made valid UTF-8; -inf log-probabilities are
// clamped to -9999 (JSON has no infinities; vLLM does the same).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "minfer/outputs.h"
#include "minfer/tokenizer.h"
#include "server/json.h"

namespace minfer::server {

class TokenJson {
 public:
  // as_ids: every token spelled "token_id:N" (vLLM's return_tokens_as_token_ids), whatever its text.
  explicit TokenJson(const Tokenizer* tokenizer, bool as_ids = false) : tok_(tokenizer), as_ids_(as_ids) {}

  // The chat logprobs of ids[i] with lps[i].
  json chat_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& lps) const;
  // The completions logprobs; text_offset advances by each token's text.
  json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& lps,
                           size_t& text_offset) const;

 private:
  std::string raw(int32_t id) const;
  std::string text(int32_t id) const;
  json bytes(int32_t id) const;

  const Tokenizer* tok_;
  bool as_ids_;
};

}  // namespace minfer::server
