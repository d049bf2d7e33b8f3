// _minfer.ChatFormat: the model's chat template and reply parsers (minfer/chat.h) for Engine.chat.
#include <pybind11/stl.h>

#include "bindings.h"
#include "minfer/chat.h"
#include "py_engine.h"

namespace minfer::python {

void bind_chat(py::module_& m) {
  py::class_<ChatFormat, std::shared_ptr<ChatFormat>>(m, "ChatFormat")
      .def(py::init([](const PyEngine& engine, const std::string& template_file, const std::string& tool_call_parser,
                       const std::string& reasoning_parser) {
             return ChatFormat::load(engine.async_engine(), template_file, tool_call_parser, reasoning_parser);
           }),
           py::arg("engine"), py::arg("template_file") = "", py::arg("tool_call_parser") = "auto",
           py::arg("reasoning_parser") = "auto")
      .def(
          "render",
          [](const ChatFormat& f, const std::string& request_json, SamplingParams params) {
            std::string prompt = f.render(request_json, params);
            return py::make_tuple(utf8_text(prompt), params);
          },
          py::arg("request_json"), py::arg("params"),
          "(prompt, params): the prompt text, and the params made ready to decode the reply")
      .def(
          "parse",
          [](const ChatFormat& f, const std::string& request_json, const std::string& prompt, const std::string& text) {
            const ChatReply r = f.parse(request_json, prompt, text);
            py::list calls;
            for (const ChatToolCall& c : r.tool_calls) {
              py::dict function;
              function["name"] = utf8_text(c.name);
              function["arguments"] = utf8_text(c.arguments);
              py::dict call;
              call["id"] = c.id;
              call["type"] = "function";
              call["function"] = function;
              calls.append(call);
            }
            return py::make_tuple(utf8_text(r.content), utf8_text(r.reasoning), calls);
          },
          py::arg("request_json"), py::arg("prompt"), py::arg("text"), "(content, reasoning, tool_calls) of a reply");
}

}  // namespace minfer::python
