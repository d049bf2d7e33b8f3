#include "server/tokenizer_routes.h"

#include <limits>

#include "server/chat_request.h"
#include "server/json_fields.h"

namespace minfer::server {

const Tokenizer& TokenizerRoutes::tokenizer(const char* field) const {
  const Tokenizer* tok = engine_.tokenizer();
  if (!tok) bad_request(field, "this model has no tokenizer");
  return *tok;
}

json TokenizerRoutes::tokenize(const json& body) const {
  const Fields f(body);
  std::vector<int32_t> ids;
  if (f.get("messages")) {
    const ChatFields chat = parse_chat_fields(f);
    const std::string text = chat_.render(chat);
    // The template writes BOS itself; add_special_tokens (default false here, as vLLM) adds the tokenizer's.
    ids = tokenizer("messages").encode(text, f.boolean("add_special_tokens").value_or(false));
  } else {
    auto prompt = f.string("prompt");
    if (!prompt) bad_request("prompt", "'prompt' (text) or 'messages' (a chat) is required");
    ids = tokenizer("prompt").encode(*prompt, f.boolean("add_special_tokens").value_or(true));
  }
  json out = {{"count", ids.size()}, {"max_model_len", engine_.config().max_model_len}, {"tokens", ids}};
  if (f.boolean("return_token_strs").value_or(false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(std::string(engine_.tokenizer()->token_text(id)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return out;
}

json TokenizerRoutes::detokenize(const json& body) const {
  const Fields f(body);
  const json* tokens = f.get("tokens");
  if (!tokens || !tokens->is_array()) bad_request("tokens", "'tokens' is required: an array of token ids");
  const Tokenizer& tok = tokenizer("tokens");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const int64_t id = Fields::as_integer((*tokens)[i], fmt::format("tokens[{}]", i), 0, tok.vocab_size() - 1);
    ids.push_back(static_cast<int32_t>(id));
  }
  return {{"prompt", tok.decode(ids)}};
}

}  // namespace minfer::server
