// The request fields that constrain the output, as OpenAI, vLLM and llama.cpp's server spell them, -> one
// SamplingParams::structured_outputs:
//   response_format   {"type": "text" | "json_object"} or {"type": "json_schema", "json_schema": {"name",
//                     "schema", "strict"}}   (OpenAI)
//   structured_outputs {"json" | "regex" | "choice" | "grammar" | "json_object": ...}   (vLLM >= 0.10)
//   guided_json, guided_regex, guided_choice, guided_grammar   (vLLM's older names)
//   grammar           a Lark grammar (llguidance's syntax)
// At most one of them may constrain a request. The grammar itself is checked by the engine (llguidance), whose
// error becomes a 400 naming the field.
#pragma once

#include <optional>
#include <string>

#include "minfer/sampling.h"
#include "server/json_fields.h"

namespace minfer::server {

struct StructuredOutputField {
  StructuredOutputs spec;
  std::string field;  // the request field it came from, for errors
};

// Throws ApiError 400 naming the field for a malformed value or for two constraints at once.
std::optional<StructuredOutputField> parse_structured_outputs(const Fields& f);

}  // namespace minfer::server
