#include "tokenizer/hf_json_reader.h"

#include <cstdint>

#include "base/error.h"
#include "base/mapped_file.h"

namespace minfer {

namespace {

using json = nlohmann::json;

// SAX handler: builds the JSON tree like nlohmann's own DOM parser, except that the members "vocab" and
// "merges" of the top-level "model" object go straight into HfTokenizerJson's vectors.
class Handler {
 public:
  explicit Handler(HfTokenizerJson& out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool null() { return add(json(nullptr)) != nullptr; }
  bool boolean(bool v) { return mode_ == Mode::kTree ? add(json(v)) != nullptr : fail_shape(); }
  bool number_integer(json::number_integer_t v) { return number(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (v > static_cast<json::number_unsigned_t>(INT64_MAX)) return fail_shape();
    return number(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t v, const std::string& /*text*/) {
    return mode_ == Mode::kTree ? add(json(v)) != nullptr : fail_shape();
  }
  bool string(std::string& v) {
    switch (mode_) {
      case Mode::kTree: return add(json(std::move(v))) != nullptr;
      case Mode::kMerges: {
        const size_t space = v.find(' ', 1);  // "left right"; split after the first byte as llama.cpp
        if (space == std::string::npos) return fail("malformed merge '" + v + "' (expected 'left right')");
        out_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
        return true;
      }
      case Mode::kMergePair:
        if (pair_size_ >= 2) return fail("a merge pair has more than two entries");
        pair_[pair_size_++] = std::move(v);
        return true;
      case Mode::kVocab: return fail_shape();
    }
    return false;
  }
  bool binary(json::binary_t& /*v*/) { return fail_shape(); }

  bool start_object(std::size_t /*elements*/) {
    if (mode_ != Mode::kTree) return fail_shape();
    if (at_model_member("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return push(json::object());
  }
  bool key(std::string& k) {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
    } else {
      key_ = std::move(k);
    }
    return true;
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kTree;
      return true;
    }
    pop();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_size_ = 0;
      return true;
    }
    if (mode_ != Mode::kTree) return fail_shape();
    if (at_model_member("merges")) {
      mode_ = Mode::kMerges;
      return true;
    }
    return push(json::array());
  }
  bool end_array() {
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ != 2) return fail("a merge pair must have two entries");
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kTree;
      return true;
    }
    pop();
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    error_ = std::string("malformed JSON: ") + ex.what();
    return false;
  }

 private:
  enum class Mode { kTree, kVocab, kMerges, kMergePair };

  bool fail(const std::string& message) {
    error_ = message;
    return false;
  }
  bool fail_shape() {
    switch (mode_) {
      case Mode::kVocab: return fail("model.vocab must map token strings to integer ids");
      case Mode::kMerges:
      case Mode::kMergePair: return fail("model.merges must hold \"left right\" strings or [left, right] pairs");
      case Mode::kTree: return fail("unexpected binary value");
    }
    return false;
  }

  bool number(int64_t v) {
    if (mode_ == Mode::kVocab) {
      out_.vocab.emplace_back(std::move(vocab_key_), v);
      return true;
    }
    return mode_ == Mode::kTree ? add(json(v)) != nullptr : fail_shape();
  }

  // The container being started is the member `name` of the top-level "model" object.
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && names_[1] == "model" && stack_.back()->is_object() && key_ == name;
  }

  json* add(json value) {
    if (mode_ != Mode::kTree) {
      fail_shape();
      return nullptr;
    }
    if (stack_.empty()) {
      out_.root = std::move(value);
      return &out_.root;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(value);
      return &slot;
    }
    top.push_back(std::move(value));
    return &top.back();
  }
  bool push(json container) {
    std::string name = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    json* p = add(std::move(container));
    if (p == nullptr) return false;
    // Pointers stay valid: objects are std::map, and an array only grows after its open child has closed.
    stack_.push_back(p);
    names_.push_back(std::move(name));
    return true;
  }
  void pop() {
    stack_.pop_back();
    names_.pop_back();
  }

  HfTokenizerJson& out_;
  Mode mode_ = Mode::kTree;
  std::vector<json*> stack_;
  std::vector<std::string> names_;  // the key each open container was stored under
  std::string key_;
  std::string vocab_key_;
  std::string pair_[2];
  int pair_size_ = 0;
  std::string error_;
};

}  // namespace

HfTokenizerJson read_hf_tokenizer_json(const std::string& path) {
  auto file = MappedFile::open(path);
  if (file->size() == 0) fail_load(path, "empty file, expected a tokenizer.json");
  HfTokenizerJson out;
  Handler handler(out);
  const char* begin = reinterpret_cast<const char*>(file->data());
  if (!json::sax_parse(begin, begin + file->size(), &handler)) fail_load(path, "{}", handler.error());
  if (!out.root.is_object()) fail_load(path, "not a tokenizer.json: the top level is not an object");
  return out;
}

json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail_load(path, "malformed JSON: {}", e.what());
  }
}

}  // namespace minfer
