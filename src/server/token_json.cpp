#include "server/token_json.h"

#include <fmt/format.h>

#include <cmath>

#include "tokenizer/unicode.h"

namespace minfer::server {
namespace {

double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

}  // namespace

std::string TokenJson::raw(int32_t id) const {
  if (!tok_ || id < 0 || id >= tok_->vocab_size()) return "";
  return tok_->is_special(id) ? std::string(tok_->token_text(id)) : tok_->token_bytes(id);
}

std::string TokenJson::text(int32_t id) const {
  if (as_ids_ || !tok_ || id < 0 || id >= tok_->vocab_size()) return fmt::format("token_id:{}", id);
  return unicode::sanitize(raw(id));
}

json TokenJson::bytes(int32_t id) const {
  json out = json::array();
  for (unsigned char b : raw(id)) out.push_back(static_cast<int>(b));
  return out;
}

json TokenJson::chat_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& lps) const {
  json content = json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    json top = json::array();
    for (const auto& [id, lp] : lps[i].top)
      top.push_back({{"token", text(id)}, {"logprob", finite_logprob(lp)}, {"bytes", bytes(id)}});
    content.push_back({{"token", text(ids[i])},
                       {"logprob", finite_logprob(lps[i].logprob)},
                       {"bytes", bytes(ids[i])},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json TokenJson::completion_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& lps,
                                    size_t& text_offset) const {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    const std::string t = text(ids[i]);
    tokens.push_back(t);
    token_lps.push_back(finite_logprob(lps[i].logprob));
    json top = json::object();
    for (const auto& [id, lp] : lps[i].top) top[text(id)] = finite_logprob(lp);
    top[t] = finite_logprob(lps[i].logprob);  // the sampled token is always among them (vLLM, OpenAI)
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace minfer::server
