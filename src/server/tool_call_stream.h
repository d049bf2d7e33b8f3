// Tool calls streamed as the model writes them: the calls text of a JSON tool-call format (hermes' <tool_call>{...},
// llama3_json's objects, mistral's [TOOL_CALLS] [...], the grammar-forced array of {"name", "parameters"} or the
// forced function's arguments object) scanned as it grows, so a call's name goes out once it is complete and its
// arguments in fragments, the model's own characters, as they arrive (vLLM streams them the same way).
// A call object is an object at the top level or inside a top-level array whose "name" string is one of the
// request's tools; its "arguments" or "parameters" value is what streams: an object or array as written, a JSON
// string decoded when it ends, "{}" when the call closes without one. Objects naming no tool are not calls. The
// format's parser still reads the whole output at the end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::server {

// New text of one call: its start (id and name, sent once, before any argument text) and/or argument characters.
struct CallFragment {
  size_t index = 0;
  bool start = false;
  std::string id, name;  // with start
  std::string arguments;
};

class ToolCallStream {
 public:
  // forced_function: the output is that function's arguments object (tool_choice naming a function); empty: the
  // calls are objects naming one of tool_names (empty: any name). mistral_ids: ids as Mistral's template wants.
  explicit ToolCallStream(std::string forced_function = "", bool mistral_ids = false,
                          std::vector<std::string> tool_names = {});

  // The calls text so far (each call extends the last); returns what is new since the previous call.
  std::vector<CallFragment> update(std::string_view text);

  // The calls streamed so far (every one started), each with its id, name and whole argument text.
  struct Call {
    std::string id, name, arguments;
    bool started = false;
    bool has_arguments = false;  // an arguments value was seen
  };
  const std::vector<Call>& calls() const { return calls_; }

 private:
  enum class Expect : unsigned char { kKey, kColon, kValue, kComma };
  struct Frame {
    char kind;          // '{' or '['
    bool call = false;  // a call object
    Expect expect = Expect::kValue;
  };
  void scan(char c, std::vector<CallFragment>& out);
  void scan_string_char(char c);
  void open_bracket(char c, bool streaming, std::vector<CallFragment>& out);
  void close_bracket(std::vector<CallFragment>& out);
  void value_done();
  void string_ended(std::vector<CallFragment>& out);
  void add_arguments_text(std::string_view text, std::vector<CallFragment>& out);
  void emit_start(std::vector<CallFragment>& out);
  bool known_tool(const std::string& name) const;

  std::string forced_function_;
  bool mistral_ids_;
  std::vector<std::string> tool_names_;
  size_t scanned_ = 0;  // characters of the text read so far
  std::vector<Frame> stack_;
  bool in_string_ = false, escape_ = false;
  std::string string_;      // the string being read, unescaped (keys and the name value)
  std::string raw_string_;  // the same as written, escapes kept (a string-valued arguments is decoded from it)
  std::string last_key_;
  size_t args_depth_ = 0;  // stack depth at which the streaming arguments value opened
  bool args_open_ = false;
  std::vector<Call> calls_;  // the last may be open and not started yet
  std::string pending_;      // the open call's argument text while its name is not known
};

}  // namespace minfer::server
