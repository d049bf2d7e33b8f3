// Request bodies of the generation routes -> one GenerationRequest, checked field by field with errors that
// name the field (OpenAI's invalid_request_error, `param` set). The fields follow the OpenAI API reference
// (completions and chat completions) plus vLLM's sampling extensions (top_k, min_p, repetition_penalty,
// ignore_eos, stop_token_ids); null counts as absent, unknown fields are ignored (as vLLM does).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "minfer/sampling.h"
#include "server/chat_request.h"
#include "server/json.h"
#include "server/json_fields.h"

namespace minfer::server {

// kMessages: Anthropic's /v1/messages (anthropic_protocol.h); kResponses: OpenAI's /v1/responses
// (responses_protocol.h): chat requests with their own response shapes.
enum class RouteKind : uint8_t { kGenerate, kCompletion, kChat, kMessages, kResponses };
// Whether the route's prompt is rendered from messages by the chat template.
inline bool is_chat(RouteKind kind) {
  return kind == RouteKind::kChat || kind == RouteKind::kMessages || kind == RouteKind::kResponses;
}

struct ResponsesContext;

// The sampling fields a client gave; those it left out take the model's own defaults (minfer::SamplingDefaults)
// on the routes that say so (Anthropic's: its current SDK sends none of them).
struct SamplingGiven {
  bool temperature = false, top_p = false, top_k = false;
};

// A prompt as given: text to encode, or token ids.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct GenerationRequest {
  RouteKind kind = RouteKind::kCompletion;
  std::string model;                 // empty: not given
  std::vector<PromptInput> prompts;  // completions: one or more; generate: one; chat: filled from messages
  ChatFields chat;                   // chat
  SamplingParams params;
  bool max_tokens_given = false;  // else the route's default, capped by what fits in max_model_len
  int n = 1;                      // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // -1: none. Completions: `logprobs` (top alternatives per token). Chat: `top_logprobs` when `logprobs`.
  int logprobs = -1;
  bool echo = false;  // completions: the prompt text precedes the completion
  // The field that set params.structured_outputs ("" when none), named in the 400 for an invalid grammar.
  std::string structured_field;
  // vLLM's return_token_ids (the output's token ids per choice, the prompt's ids) and return_tokens_as_token_ids
  // (logprob tokens spelled "token_id:N").
  bool return_token_ids = false;
  bool tokens_as_ids = false;
  // "timeout": seconds after which the request is ended (408) and its engine requests aborted; 0 = none (the
  // server's --request-timeout, if any, still applies; the shorter wins).
  double timeout_s = 0;
  // Set on routes whose unset sampling fields take the model's defaults (generation_config.json).
  std::optional<SamplingGiven> model_defaults;
  // /v1/responses: what the response repeats and stores (responses_protocol.h).
  std::shared_ptr<const ResponsesContext> responses;
  // The chat messages' images as files (fetched from chat.images when the request is prepared).
  std::vector<std::string> image_files;
};

// The body as a JSON object. Throws ApiError 400 for malformed JSON, invalid UTF-8 or a non-object.
json parse_json_body(std::string_view body);

// Throw ApiError 400 naming the field for a wrong type or a value out of range.
GenerationRequest parse_generate_request(const json& body);
GenerationRequest parse_completion_request(const json& body);
GenerationRequest parse_chat_request(const json& body);

// What the chat-shaped routes share (chat completions, Anthropic's messages, OpenAI's responses):
// tool_choice "required" / a named function as the output's grammar (a grammar given already is a 400 naming both),
// and vLLM's structured_outputs extension on the routes whose own API spells grammars another way.
void force_tool_calls(GenerationRequest& r);
void add_structured_outputs(const Fields& f, GenerationRequest& r);

}  // namespace minfer::server
