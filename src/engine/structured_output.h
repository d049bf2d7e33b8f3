// Structured outputs on llguidance (its C API, linked from rust/minfer_ffi): a GrammarCompiler per engine turns
// a request's StructuredOutputs into a GrammarMatcher, which gives the allowed next tokens as a bitmask and
// follows the tokens sampled. GrammarMaskWorker computes the masks of a step on its own thread while the
// forward pass runs, so a constrained sequence waits for its mask only when the mask takes longer than the
// model; steps without constrained sequences never touch it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "minfer/sampling.h"
#include "minfer/tokenizer.h"

struct LlgTokenizer;
struct LlgMatcher;

namespace minfer {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(LlgMatcher* matcher) : matcher_(matcher) {}
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // The tokens allowed next: bit (id % 32) of mask[id / 32]. Sized by the matcher. Throws Error on failure.
  void compute_mask(std::vector<uint32_t>& mask);
  // Follows a sampled token. Throws Error when the grammar cannot take it (the mask forbade it).
  void accept(int32_t token);
  // The language allows no more text (the output is complete).
  bool is_stopped() const;

 private:
  LlgMatcher* matcher_;
};

class GrammarCompiler {
 public:
  // Builds llguidance's token table from the tokenizer: each token's bytes, special tokens marked so that
  // grammars never produce them as text. eos_ids: the tokens that end the output when the grammar is complete.
  GrammarCompiler(const Tokenizer& tokenizer, std::span<const int32_t> eos_ids);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Thread-safe. Throws Error(kInvalidArgument) carrying llguidance's message for an invalid schema, regex or
  // grammar.
  std::unique_ptr<GrammarMatcher> compile(const StructuredOutputs& spec) const;

 private:
  LlgTokenizer* llg_ = nullptr;
};

// Sets the logits of the tokens the mask forbids (and of ids beyond the mask) to -inf.
void apply_token_mask(std::span<float> logits, std::span<const uint32_t> mask);

// One helper thread computing a step's masks while the model runs.
class GrammarMaskWorker {
 public:
  struct Job {
    GrammarMatcher* matcher;
    std::vector<uint32_t>* mask;
  };
  GrammarMaskWorker();
  ~GrammarMaskWorker();

  // Starts computing (returns at once). Must be followed by wait() before the next start().
  void start(std::vector<Job> jobs);
  // Blocks until the jobs are done; rethrows the first job's error.
  void wait();
  // The last batch's compute time (read after wait()).
  double last_seconds() const { return last_seconds_; }

  // Waits for the worker (if any) at wait() or, when an exception leaves the scope first, in the destructor.
  class Join {
   public:
    explicit Join(GrammarMaskWorker* worker) : worker_(worker) {}
    ~Join();
    void wait();

   private:
    GrammarMaskWorker* worker_;
  };

 private:
  void run();
  std::string wait_idle();  // until the jobs are done; their first error, "" for none

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> jobs_;
  bool busy_ = false;
  bool stop_ = false;
  std::string error_;
  double last_seconds_ = 0.0;
  std::thread thread_;  // last: started once the rest is initialised
};

}  // namespace minfer
