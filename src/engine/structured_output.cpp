#include "engine/structured_output.h"

#include <fmt/format.h>
#include <llguidance.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"

namespace minfer {
namespace {

constexpr const char* constraint_type(StructuredOutputs::Kind kind) {
  switch (kind) {
    case StructuredOutputs::Kind::kJsonSchema: return "json_schema";
    case StructuredOutputs::Kind::kJsonObject: return "json_schema";  // {"type": "object"} with our defaults
    case StructuredOutputs::Kind::kRegex: return "regex";
    case StructuredOutputs::Kind::kChoice: return "lark";  // turned into a Lark alternation below
    case StructuredOutputs::Kind::kGrammar: return "lark";
  }
  return "lark";
}

// guided_choice ["a", "b"] -> start: "a" | "b" (a JSON string literal is a valid Lark one)
std::string choice_grammar(const std::string& spec) {
  const nlohmann::json choices = nlohmann::json::parse(spec, nullptr, /*allow_exceptions=*/false);
  if (!choices.is_array() || choices.empty())
    throw Error("structured outputs: choice must be a non-empty array of strings", ErrorCode::kInvalidArgument);
  std::string grammar = "start: ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!choices[i].is_string())
      throw Error("structured outputs: choice must be a non-empty array of strings", ErrorCode::kInvalidArgument);
    if (i) grammar += " | ";
    grammar += choices[i].dump();
  }
  return grammar;
}

// JSON whitespace between tokens: nothing, one space, or a newline and up to 20 spaces or tabs of indent (the
// `space` rule of llama.cpp's json-schema-to-grammar). llguidance's default allows any run of whitespace, which
// a small model can fill forever; a schema's own "x-guidance" options take precedence.
constexpr const char* kJsonWhitespace = R"((\x20|\n[\x20\t]{0,20}))";

std::string json_schema_with_defaults(const StructuredOutputs& spec) {
  nlohmann::ordered_json schema = nlohmann::ordered_json::object({{"type", "object"}});
  if (spec.kind == StructuredOutputs::Kind::kJsonSchema) {
    schema = nlohmann::ordered_json::parse(spec.spec, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded())
      throw Error("structured outputs: the JSON schema is not valid JSON", ErrorCode::kInvalidArgument);
  }
  if (schema.is_object() && !schema.contains("x-guidance"))
    schema["x-guidance"] = {{"whitespace_pattern", kJsonWhitespace}};
  return schema.dump();
}

}  // namespace

GrammarMatcher::~GrammarMatcher() { llg_free_matcher(matcher_); }

void GrammarMatcher::compute_mask(std::vector<uint32_t>& mask) {
  mask.resize(llg_matcher_get_mask_byte_size(matcher_) / sizeof(uint32_t));
  if (llg_matcher_compute_mask_into(matcher_, mask.data(), mask.size() * sizeof(uint32_t)) != 0)
    fail("structured outputs: computing the token mask failed: {}", llg_matcher_get_error(matcher_));
}

void GrammarMatcher::accept(int32_t token) {
  if (llg_matcher_consume_token(matcher_, static_cast<uint32_t>(token)) != 0)
    fail("structured outputs: the grammar cannot take token {}: {}", token, llg_matcher_get_error(matcher_));
}

bool GrammarMatcher::is_stopped() const { return llg_matcher_is_stopped(matcher_); }

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer, std::span<const int32_t> eos_ids) {
  const int32_t vocab = tokenizer.vocab_size();
  std::vector<uint32_t> lens(static_cast<size_t>(vocab));
  std::string bytes;
  for (int32_t id = 0; id < vocab; ++id) {
    // llguidance's convention: a special token is 0xFF followed by its text, so no grammar matches it as text.
    const size_t before = bytes.size();
    if (tokenizer.is_special(id)) {
      bytes.push_back('\xff');
      bytes.append(tokenizer.token_text(id));
    } else {
      bytes.append(tokenizer.token_bytes(id));
    }
    lens[static_cast<size_t>(id)] = static_cast<uint32_t>(bytes.size() - before);
  }
  std::vector<uint32_t> extra_eos;
  for (size_t i = 1; i < eos_ids.size(); ++i) extra_eos.push_back(static_cast<uint32_t>(eos_ids[i]));
  LlgTokenizerInitV2 init{};
  init.struct_size = sizeof(LlgTokenizerInitV2);
  init.vocab_size = static_cast<uint32_t>(vocab);
  init.tok_eos = eos_ids.empty() ? std::numeric_limits<uint32_t>::max() : static_cast<uint32_t>(eos_ids[0]);
  init.token_lens = lens.data();
  init.token_bytes = reinterpret_cast<const uint8_t*>(bytes.data());
  // llguidance's own greedy tokenization over this table rather than the model's tokenizer: the masks come from
  // the token table alone, and the model's encode() adds SentencePiece's dummy-prefix space, which llguidance
  // reads as part of the text (a regex "x" then allowed only "▁"). Greedy matters only for fast-forward tokens,
  // which the engine does not use.
  init.use_approximate_greedy_tokenize_fn = true;
  init.tok_eos_extra = extra_eos.empty() ? nullptr : extra_eos.data();
  init.tok_eos_extra_count = static_cast<uint32_t>(extra_eos.size());
  char error[1024] = {0};
  llg_ = llg_new_tokenizer_v2(&init, error, sizeof error);
  if (!llg_) fail("structured outputs: llguidance rejected the tokenizer: {}", error);
}

GrammarCompiler::~GrammarCompiler() { llg_free_tokenizer(llg_); }

std::unique_ptr<GrammarMatcher> GrammarCompiler::compile(const StructuredOutputs& spec) const {
  LlgConstraintInit init;
  llg_constraint_init_set_defaults(&init, llg_);
  init.log_stderr_level = 0;  // errors come back to the client, not to the server's log
  const bool json =
      spec.kind == StructuredOutputs::Kind::kJsonSchema || spec.kind == StructuredOutputs::Kind::kJsonObject;
  const std::string data = spec.kind == StructuredOutputs::Kind::kChoice ? choice_grammar(spec.spec)
                           : json                                        ? json_schema_with_defaults(spec)
                                                                         : spec.spec;
  LlgMatcher* m = llg_new_matcher(&init, constraint_type(spec.kind), data.c_str());
  auto matcher = std::make_unique<GrammarMatcher>(m);
  if (llg_matcher_is_error(m))
    throw Error(fmt::format("structured outputs: {}", llg_matcher_get_error(m)), ErrorCode::kInvalidArgument);
  return matcher;
}

void apply_token_mask(std::span<float> logits, std::span<const uint32_t> mask) {
  const size_t covered = std::min(logits.size(), mask.size() * 32);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w * 32 < covered; ++w) {
    const uint32_t bits = mask[w];
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(covered, w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i)
      if (!(bits >> (i - w * 32) & 1u)) logits[i] = kNegInf;
  }
  for (size_t i = covered; i < logits.size(); ++i) logits[i] = kNegInf;
}

GrammarMaskWorker::GrammarMaskWorker() : thread_([this] { run(); }) {}

GrammarMaskWorker::~GrammarMaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GrammarMaskWorker::start(std::vector<Job> jobs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    MINFER_CHECK(!busy_, "GrammarMaskWorker::start while busy");
    jobs_ = std::move(jobs);
    busy_ = true;
    error_.clear();
  }
  cv_.notify_all();
}

std::string GrammarMaskWorker::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
  return error_;
}

void GrammarMaskWorker::wait() {
  if (std::string error = wait_idle(); !error.empty()) throw Error(error);
}

void GrammarMaskWorker::Join::wait() {
  GrammarMaskWorker* w = std::exchange(worker_, nullptr);
  if (w) w->wait();
}

GrammarMaskWorker::Join::~Join() {
  if (worker_) worker_->wait_idle();  // an exception is already on its way: the masks' own error is dropped
}

void GrammarMaskWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || busy_; });
    if (stop_) return;
    std::vector<Job> jobs = std::move(jobs_);
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    for (const Job& job : jobs) {
      try {
        job.matcher->compute_mask(*job.mask);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    last_seconds_ = seconds;
    error_ = std::move(error);
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace minfer
