// The pieces of the _minfer extension module, one file each; module.cpp puts them together.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace minfer::python {

namespace py = pybind11;

void bind_config(py::module_& m);   // EngineConfig, QuantConfig, SamplingParams
void bind_outputs(py::module_& m);  // RequestOutput, CompletionOutput
void bind_engine(py::module_& m);   // Engine, RequestHandle
void bind_chat(py::module_& m);     // ChatFormat
void bind_media(py::module_& m);    // decode_image, preprocess_image

// Engine text as a Python str. The engine only emits whole UTF-8 characters, but a str must never fail to
// build, so bytes that are not UTF-8 (a decode of arbitrary ids) become U+FFFD.
py::str utf8_text(const std::string& bytes);

}  // namespace minfer::python
