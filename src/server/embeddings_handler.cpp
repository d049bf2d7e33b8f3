#include "server/embeddings_handler.h"

#include <cstring>
#include <limits>

#include "server/api_error.h"
#include "server/choice.h"
#include "server/json_fields.h"
#include "server/response_writer.h"
#include "server/strand_wakeup.h"

namespace minfer::server {
namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on inputs per request

std::string base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian f32, as OpenAI's base64 encoding
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = static_cast<unsigned char>(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0;
    const uint32_t n = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::vector<int32_t> ids_of(const json& array, const std::string& field) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < array.size(); ++i)
    ids.push_back(static_cast<int32_t>(
        Fields::as_integer(array[i], fmt::format("{}[{}]", field, i), 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

}  // namespace

std::vector<std::vector<int32_t>> EmbeddingsHandler::inputs(const json& body) const {
  const Fields f(body);
  const json* input = f.get("input");
  if (!input) bad_request("input", "'input' is required: a string, strings, token ids or lists of token ids");
  const Tokenizer* tok = engine_.tokenizer();
  auto encode = [&](const json& text) {
    if (!tok) bad_request("input", "this model has no tokenizer: send token ids");
    return tok->encode(text.get<std::string>(), /*add_special=*/true);
  };
  std::vector<std::vector<int32_t>> out;
  if (input->is_string()) {
    out.push_back(encode(*input));
  } else if (input->is_array() && !input->empty() && input->size() <= kMaxInputs) {
    const json& first = (*input)[0];
    for (size_t i = 0; i < input->size(); ++i) {
      const json& item = (*input)[i];
      const std::string field = fmt::format("input[{}]", i);
      if (first.is_string() && item.is_string())
        out.push_back(encode(item));
      else if (first.is_array() && item.is_array())
        out.push_back(ids_of(item, field));
      else if (first.is_number() && i == 0)
        out.push_back(ids_of(*input, "input"));
      else if (!first.is_number())
        bad_request(field, "'{}' must be of the same kind as input[0]", field);
      if (first.is_number()) break;
    }
  } else {
    bad_request("input",
                "'input' must be a string, a non-empty array of up to {} strings, token ids, or lists of "
                "token ids",
                kMaxInputs);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) bad_request("input", "input {} is empty (it encodes to no tokens)", i);
    if (static_cast<int64_t>(out[i].size()) > engine_.config().max_model_len)
      throw ApiError(400,
                     fmt::format("input {} has {} tokens; this model's maximum context length is {}", i, out[i].size(),
                                 engine_.config().max_model_len),
                     "input", "context_length_exceeded");
  }
  return out;
}

asio::awaitable<void> EmbeddingsHandler::handle(const json& body, Connection& connection) {
  const Fields f(body);
  if (auto model = f.string("model"); model && *model != model_name_)
    throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", *model, model_name_),
                   "model", "model_not_found");
  const std::string format = f.string("encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    bad_request("encoding_format", "'encoding_format' must be float or base64, got '{}'", format);
  const std::vector<std::vector<int32_t>> prompts = inputs(body);

  auto wakeup = std::make_shared<StrandWakeup>(connection.executor());
  std::vector<Choice> requests;
  AbortUnfinished abort_left{engine_, requests};
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams params;
    params.max_tokens = 1;
    try {
      requests.push_back({i, engine_.add_request(prompts[i], params, {.on_update = [wakeup] { wakeup->notify(); }})});
    } catch (const Error& e) {
      throw api_error(e, "input");
    }
  }
  connection.watch_peer([wakeup] { wakeup->wake(); });
  while (!all_finished(requests)) {
    co_await wakeup->wait();
    if (connection.peer_gone()) {
      metrics_.record_disconnect();
      co_return;
    }
  }
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const CompletionOutput r = requests[i].state->result();
    if (!r.error.empty())
      throw ApiError(r.error_unavailable ? 503 : 500, fmt::format("the engine failed the request: {}", r.error));
    if (r.embedding.empty()) throw ApiError(503, "the request was aborted: the server is shutting down");
    // The hidden size is known once an embedding exists; a wrong `dimensions` fails the whole request.
    if (auto dims = f.integer("dimensions", 1, std::numeric_limits<int32_t>::max());
        dims && *dims != static_cast<int64_t>(r.embedding.size()))
      bad_request("dimensions", "'dimensions' must be this model's hidden size, {}, got {}", r.embedding.size(), *dims);
    tokens += static_cast<int64_t>(prompts[i].size());
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", format == "base64" ? json(base64(r.embedding)) : json(r.embedding)}});
  }
  const json out = {{"object", "list"},
                    {"data", std::move(data)},
                    {"model", model_name_},
                    {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  co_await connection.send(http::status::ok, dump_json(out), "application/json");
}

}  // namespace minfer::server
