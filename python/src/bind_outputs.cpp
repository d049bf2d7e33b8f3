// What a request returns: RequestOutput (one streamed step) and CompletionOutput (a finished request).
// Read-only; the Python layer turns them into its own result classes.
#include <pybind11/stl.h>

#include "bindings.h"
#include "minfer/outputs.h"

namespace minfer::python {
namespace {

// None while running, else "stop", "length" or "abort".
py::object reason(FinishReason r) {
  if (r == FinishReason::kNone) return py::none();
  return py::str(finish_reason_name(r));
}

}  // namespace

void bind_outputs(py::module_& m) {
  py::class_<SpecDecodeUsage>(m, "SpecDecodeUsage")
      .def_readonly("num_drafts", &SpecDecodeUsage::num_drafts)
      .def_readonly("draft_tokens", &SpecDecodeUsage::draft_tokens)
      .def_readonly("accepted_tokens", &SpecDecodeUsage::accepted_tokens);
  py::class_<RequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &RequestOutput::id)
      .def_readonly("new_token_ids", &RequestOutput::new_token_ids)
      .def_property_readonly("text_delta", [](const RequestOutput& o) { return utf8_text(o.text_delta); })
      .def_readonly("finished", &RequestOutput::finished)
      .def_property_readonly("finish_reason", [](const RequestOutput& o) { return reason(o.finish_reason); })
      .def_property_readonly("stop_reason", [](const RequestOutput& o) { return utf8_text(o.stop_reason); })
      .def_property_readonly("error", [](const RequestOutput& o) { return utf8_text(o.error); })
      .def_readonly("prompt_tokens", &RequestOutput::prompt_tokens)
      .def_readonly("output_tokens", &RequestOutput::output_tokens)
      .def_readonly("cached_tokens", &RequestOutput::cached_tokens)
      .def_readonly("spec_decode", &RequestOutput::spec_decode);

  py::class_<CompletionOutput>(m, "CompletionOutput")
      .def_readonly("request_id", &CompletionOutput::id)
      .def_readonly("prompt_token_ids", &CompletionOutput::prompt_token_ids)
      .def_readonly("token_ids", &CompletionOutput::token_ids)
      .def_property_readonly("text", [](const CompletionOutput& o) { return utf8_text(o.text); })
      .def_property_readonly("finish_reason", [](const CompletionOutput& o) { return reason(o.finish_reason); })
      .def_property_readonly("stop_reason", [](const CompletionOutput& o) { return utf8_text(o.stop_reason); })
      .def_readonly("cached_tokens", &CompletionOutput::cached_tokens)
      .def_readonly("spec_decode", &CompletionOutput::spec_decode)
      .def_readonly("embedding", &CompletionOutput::embedding);
}

}  // namespace minfer::python
