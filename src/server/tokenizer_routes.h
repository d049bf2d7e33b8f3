// POST /tokenize and POST /detokenize, as vLLM serves them:
//   /tokenize    {"prompt": text, "add_special_tokens": true} or {"messages": [...], "add_generation_prompt": true,
//                "tools", "chat_template_kwargs"} (the chat template applied, as a chat request would be)
//                -> {"count", "max_model_len", "tokens", "token_strs" (with "return_token_strs": true)}
//   /detokenize  {"tokens": [ids]} -> {"prompt": text}
#pragma once

#include "minfer/engine.h"
#include "server/chat_prompt.h"
#include "server/json.h"

namespace minfer::server {

class TokenizerRoutes {
 public:
  TokenizerRoutes(const AsyncEngine& engine, const ChatPrompt& chat) : engine_(engine), chat_(chat) {}

  // Throw ApiError 400 naming the field for a malformed body.
  json tokenize(const json& body) const;
  json detokenize(const json& body) const;

 private:
  const Tokenizer& tokenizer(const char* field) const;

  const AsyncEngine& engine_;
  const ChatPrompt& chat_;
};

}  // namespace minfer::server
