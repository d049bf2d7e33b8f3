// One choice of a response: one engine request, read through its RequestState. What the handlers that wait on
// several engine requests share (generation_handler.h, embeddings_handler.h).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "minfer/engine.h"
#include "minfer/request_state.h"

namespace minfer::server {

struct Choice {
  size_t prompt_index = 0;
  std::shared_ptr<RequestState> state;
  size_t text_offset = 0;        // completions logprobs: where the next token's text starts
  bool prompt_ids_sent = false;  // return_token_ids: the prompt's ids went out (a stream sends them once)
};

inline bool all_finished(const std::vector<Choice>& choices) {
  for (const Choice& c : choices)
    if (!c.state->finished()) return false;
  return true;
}

inline bool all_done(const std::vector<Choice>& choices) {
  for (const Choice& c : choices)
    if (!c.state->done()) return false;
  return true;
}

// Aborts the engine requests still running when the handler leaves early (client gone, write failed, a later
// request refused), which frees their KV pages at the engine's next step.
struct AbortUnfinished {
  AsyncEngine& engine;
  std::vector<Choice>& choices;
  ~AbortUnfinished() {
    for (const Choice& c : choices)
      if (c.state && !c.state->finished()) engine.abort(c.state->id());
  }
};

}  // namespace minfer::server
