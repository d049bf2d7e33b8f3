// The Engine and RequestHandle classes. Every call that can wait (loading, encoding, waiting for outputs)
// runs with the GIL released, so Python threads submit and wait concurrently; waits are cut into slices so
// Ctrl-C reaches the waiting thread, and an interrupted generate() aborts its requests.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "minfer/error.h"
#include "py_engine.h"

namespace minfer::python {
namespace {

// How long a wait runs with the GIL released before the thread checks for signals.
constexpr std::chrono::milliseconds kWaitSlice{100};

// Throws (KeyboardInterrupt, ...) when a signal handler raised; needs the GIL.
void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// images: per prompt, its encoded image files (empty: none for any).
std::vector<CompletionOutput> generate(PyEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                       const std::vector<SamplingParams>& params,
                                       const std::vector<std::vector<py::bytes>>& images) {
  if (params.size() != prompts.size() || (!images.empty() && images.size() != prompts.size()))
    throw py::value_error("generate: " + std::to_string(prompts.size()) + " prompts but " +
                          std::to_string(params.size()) + " sampling parameter sets and " +
                          std::to_string(images.size()) + " image lists");
  std::vector<std::vector<std::string>> files(prompts.size());
  for (size_t i = 0; i < images.size(); ++i)
    for (const py::bytes& b : images[i]) files[i].push_back(b);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  {
    py::gil_scoped_release nogil;
    try {
      for (size_t i = 0; i < prompts.size(); ++i)
        handles.push_back(engine.submit(prompts[i], params[i], /*stream=*/false, std::move(files[i])));
    } catch (...) {
      // A bad prompt leaves nothing of the call behind.
      for (auto& h : handles) h->abort();
      throw;
    }
  }
  for (;;) {
    bool all_done = false;
    {
      py::gil_scoped_release nogil;
      all_done = wait_all(handles, kWaitSlice);
    }
    if (all_done) break;
    try {
      check_signals();
    } catch (...) {
      for (auto& h : handles) h->abort();
      throw;
    }
  }
  std::vector<CompletionOutput> results;
  for (auto& h : handles) {
    results.push_back(h->state().result());
    if (!results.back().error.empty())
      throw Error("the engine failed the request: " + results.back().error, ErrorCode::kUnavailable);
  }
  return results;
}

// The next output of a streamed request, or None once its finished output has been taken.
py::object next_output(RequestHandle& handle) {
  for (;;) {
    std::optional<RequestOutput> out;
    {
      py::gil_scoped_release nogil;
      out = handle.state().next(kWaitSlice);
    }
    if (out) {
      if (!out->error.empty()) throw Error("the engine failed the request: " + out->error, ErrorCode::kUnavailable);
      return py::cast(std::move(*out));
    }
    if (handle.done()) return py::none();
    try {
      check_signals();
    } catch (...) {
      handle.abort();
      throw;
    }
  }
}

py::dict stats_dict(const EngineStats& s) {
  py::dict d;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["page_size"] = s.page_size;
  d["pages_total"] = s.pages_total;
  d["pages_used"] = s.pages_used;
  d["pages_free"] = s.pages_free;
  d["pages_cached"] = s.pages_cached;
  d["kv_pool_bytes"] = s.kv_pool_bytes;
  d["window_pages_total"] = s.window_pages_total;
  d["window_pages_used"] = s.window_pages_used;
  d["window_pages_released"] = s.window_pages_released;
  d["kv_utilisation"] = s.kv_utilisation;
  d["prefix_queried_tokens"] = s.prefix_queried_tokens;
  d["prefix_hit_tokens"] = s.prefix_hit_tokens;
  d["prefix_cache_hit_rate"] = s.prefix_cache_hit_rate;
  d["num_preemptions"] = s.num_preemptions;
  d["prompt_tokens"] = s.prompt_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["computed_tokens"] = s.computed_tokens;
  d["num_steps"] = s.num_steps;
  d["max_num_running"] = s.max_num_running;
  d["requests_finished"] = s.requests_finished;
  d["max_model_len"] = s.max_model_len;
  d["spec_num_drafts"] = s.spec_num_drafts;
  d["spec_draft_tokens"] = s.spec_draft_tokens;
  d["spec_accepted_tokens"] = s.spec_accepted_tokens;
  d["spec_accepted_per_pos"] = s.spec_accepted_per_pos;
  for (const auto& [name, t] : {std::pair{"ram_tier", &s.ram_tier}, std::pair{"disk_tier", &s.disk_tier}}) {
    py::dict tier;
    tier["enabled"] = t->enabled;
    tier["hit_tokens"] = t->hit_tokens;
    tier["read_bytes"] = t->read_bytes;
    tier["written_bytes"] = t->written_bytes;
    tier["entries"] = t->entries;
    tier["bytes"] = t->bytes;
    tier["evictions"] = t->evictions;
    tier["corrupt_removed"] = t->corrupt_removed;
    d[name] = tier;
  }
  return d;
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<RequestHandle, std::shared_ptr<RequestHandle>>(m, "RequestHandle")
      .def_property_readonly("request_id", &RequestHandle::id)
      .def_property_readonly("prompt_token_ids", &RequestHandle::prompt_token_ids)
      .def_property_readonly("done", &RequestHandle::done)
      .def("next_output", &next_output, "Waits for the next RequestOutput; None after the finished one.")
      .def("abort", &RequestHandle::abort, "Ends the request if it is still running.");

  py::class_<PyEngine>(m, "Engine")
      .def(py::init([](EngineConfig config) {
             py::gil_scoped_release nogil;
             return std::make_unique<PyEngine>(config);
           }),
           py::arg("config"))
      .def(
          "encode_prompt",
          [](const PyEngine& e, const std::string& text) {
            py::gil_scoped_release nogil;
            return e.encode_prompt(text);
          },
          py::arg("text"))
      .def(
          "submit",
          [](PyEngine& e, std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
             const std::vector<py::bytes>& images) {
            std::vector<std::string> files(images.begin(), images.end());
            py::gil_scoped_release nogil;
            return e.submit(std::move(prompt_token_ids), params, /*stream=*/true, std::move(files));
          },
          py::arg("prompt_token_ids"), py::arg("params"), py::arg("images") = std::vector<py::bytes>{})
      .def("generate", &generate, py::arg("prompts"), py::arg("params"),
           py::arg("images") = std::vector<std::vector<py::bytes>>{})
      .def("stats", [](const PyEngine& e) { return stats_dict(e.stats()); })
      .def_property_readonly("config", [](const PyEngine& e) { return e.config(); })
      .def(
          "tokenizer_encode",
          [](PyEngine& e, const std::string& text, bool add_special, bool parse_special) {
            py::gil_scoped_release nogil;
            const Tokenizer& t = e.tokenizer();
            std::lock_guard<std::mutex> lock(e.tokenizer_mutex());
            return t.encode(text, add_special, parse_special);
          },
          py::arg("text"), py::arg("add_special"), py::arg("parse_special"))
      .def(
          "tokenizer_decode",
          [](PyEngine& e, const std::vector<int32_t>& ids, bool skip_special) {
            std::string text;
            {
              py::gil_scoped_release nogil;
              const Tokenizer& t = e.tokenizer();
              std::lock_guard<std::mutex> lock(e.tokenizer_mutex());
              text = t.decode(ids, skip_special);
            }
            return utf8_text(text);
          },
          py::arg("ids"), py::arg("skip_special"))
      .def("tokenizer_info",
           [](PyEngine& e) {
             py::dict d;
             const Tokenizer& t = e.tokenizer();
             d["vocab_size"] = t.vocab_size();
             d["bos_token_id"] = t.bos_id() >= 0 ? py::object(py::int_(t.bos_id())) : py::none();
             d["eos_token_ids"] = t.eos_ids();
             d["adds_bos"] = t.adds_bos();
             return d;
           })
      .def("close",
           [](PyEngine& e) {
             py::gil_scoped_release nogil;
             e.close();
           })
      .def_property_readonly("closed", &PyEngine::closed);
}

}  // namespace minfer::python
