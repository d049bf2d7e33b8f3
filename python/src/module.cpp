// The compiled half of the Python package: python/minfer/*.py wraps it in the public API.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "minfer/error.h"

namespace minfer::python {

py::str utf8_text(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

}  // namespace minfer::python

PYBIND11_MODULE(_minfer, m) {
  namespace py = pybind11;
  m.doc() = "minfer's compiled engine bindings; use the `minfer` package, not this module.";

  // Everything the engine rejects or fails on is a minfer::Error whose message says what to change; nearly
  // all of it is bad input (config, prompt, sampling parameters, a checkpoint file), hence a ValueError.
  // Translators run newest first, so the subclass is registered after its base.
  auto& error = py::register_exception<minfer::Error>(m, "MinferError", PyExc_ValueError);
  error.attr("__module__") = "minfer";
  error.attr("__doc__") = "An error reported by the minfer engine (bad configuration, prompt or parameters, ...).";
  auto& load_error = py::register_exception<minfer::LoadError>(m, "ModelLoadError", error.ptr());
  load_error.attr("__module__") = "minfer";
  load_error.attr("__doc__") = "A checkpoint or tokenizer file could not be read; the message starts with its path.";

  minfer::python::bind_config(m);
  minfer::python::bind_outputs(m);
  minfer::python::bind_engine(m);
  minfer::python::bind_chat(m);
  minfer::python::bind_media(m);
}
