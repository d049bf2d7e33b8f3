// StopChecker with a real byte-level BPE tokenizer (the tiny-qwen2 test model's): stop strings across
// token boundaries, held-back text released exactly once, EOS / stop ids, max_tokens and the context cap,
// and characters split over several tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/stop_checker.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "model/test_model_writer.h"
#include "model/test_tokenizer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

class StopCheckerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = fs::temp_directory_path() / "minfer_stop_checker_test_tiny_qwen2";
    if (!fs::exists(dir / "config.json")) {
      TestModelOptions o;
      o.preset = "tiny-qwen2";
      o.out_dir = dir.string();
      o.dtype = DType::F32;
      write_test_model(o);
    }
    const ModelWeights w = load_model(dir.string());
    tok_ = load_tokenizer(w).release();
  }
  static void TearDownTestSuite() { delete tok_; }

  // Token ids whose decoded pieces are exactly `pieces` (each piece encoded on its own).
  static std::vector<int32_t> ids(const std::vector<std::string>& pieces) {
    std::vector<int32_t> out;
    for (const std::string& p : pieces) {
      const std::vector<int32_t> e = tok_->encode(p, /*add_special=*/false, /*parse_special=*/false);
      out.insert(out.end(), e.begin(), e.end());
    }
    return out;
  }

  struct Run {
    std::vector<std::string> deltas;  // one per token
    std::vector<std::string> so_far;  // released text after each token
    std::string text;
    FinishReason finish = FinishReason::kNone;
    std::string stop_reason;
    size_t tokens_used = 0;
  };
  static Run run(const SamplingParams& p, const std::vector<int32_t>& tokens, std::vector<int32_t> eos = {},
                 int64_t prompt_len = 3, int64_t max_total = 1000) {
    StopChecker sc(p, tok_, eos, prompt_len, max_total);
    Run r;
    for (int32_t t : tokens) {
      ++r.tokens_used;
      StopChecker::Step s = sc.append(t, static_cast<int64_t>(r.tokens_used));
      r.deltas.push_back(s.text);
      r.text += s.text;
      r.so_far.push_back(r.text);
      if (s.finish != FinishReason::kNone) {
        r.finish = s.finish;
        r.stop_reason = s.stop_reason;
        break;
      }
    }
    EXPECT_EQ(r.text, sc.text());
    return r;
  }

  static Tokenizer* tok_;
};
Tokenizer* StopCheckerTest::tok_ = nullptr;

SamplingParams params(std::vector<std::string> stop = {}, int32_t max_tokens = 100) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.stop = std::move(stop);
  return p;
}

TEST_F(StopCheckerTest, NoStopStringsStreamsEverythingOnce) {
  const Run r = run(params(), ids({"Hello", " world", "!"}));
  EXPECT_EQ(r.text, "Hello world!");
  EXPECT_EQ(r.finish, FinishReason::kNone);
}

TEST_F(StopCheckerTest, StopStringAcrossTokensIsCutAndNotStreamed) {
  // "STOP" arrives split as "ST" + "OP": after "ST" the text is held back, then the match drops it.
  const std::vector<int32_t> t = ids({"Hello", " ST", "OP", " more"});
  const Run r = run(params({"STOP"}), t);
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_reason, "STOP");
  for (const std::string& d : r.deltas) EXPECT_EQ(d.find('S'), std::string::npos) << d;
}

TEST_F(StopCheckerTest, HeldTextIsReleasedWhenItStopsLookingLikeAStop) {
  const Run r = run(params({"STOP"}), ids({"Hello", " ST", "ay", "!"}));
  EXPECT_EQ(r.text, "Hello STay!");
  EXPECT_EQ(r.finish, FinishReason::kNone);
  // "ST" was not streamed with " " but after the next token proved it harmless.
  const size_t n = ids({"Hello", " ST"}).size();
  ASSERT_GT(r.so_far.size(), n);
  EXPECT_EQ(r.so_far[n - 1], "Hello ");
  EXPECT_EQ(r.so_far.back(), "Hello STay!");
}

TEST_F(StopCheckerTest, EarliestOfSeveralStopStringsWins) {
  const Run r = run(params({"world", "lo w"}), ids({"Hello world"}));
  EXPECT_EQ(r.text, "Hel");
  EXPECT_EQ(r.stop_reason, "lo w");
}

TEST_F(StopCheckerTest, EosAndStopIdsEndWithoutText) {
  const std::vector<int32_t> hi = ids({"Hi"}), there = ids({" there"});
  std::vector<int32_t> with_eos = hi;
  with_eos.push_back(7);
  with_eos.insert(with_eos.end(), there.begin(), there.end());
  Run r = run(params(), with_eos, /*eos=*/{7});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens_used, hi.size() + 1);
  EXPECT_EQ(r.text, "Hi");

  SamplingParams p = params();
  p.ignore_eos = true;
  r = run(p, with_eos, {7});
  EXPECT_EQ(r.tokens_used, with_eos.size());
  EXPECT_EQ(r.finish, FinishReason::kNone);

  p.stop_token_ids = {there.back()};
  r = run(p, with_eos, {7});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens_used, with_eos.size());
}

TEST_F(StopCheckerTest, HeldTextIsReleasedAtTheEnd) {
  // Ends by max_tokens while "ST" is held: it is released, never lost.
  const std::vector<int32_t> t = ids({"Hello", " ST"});
  const Run r = run(params({"STOP"}, static_cast<int32_t>(t.size())), t);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.text, "Hello ST");
}

TEST_F(StopCheckerTest, ContextLimitEndsWithLength) {
  const Run r = run(params(), ids({"a", "b", "c", "d", "e"}), {}, /*prompt_len=*/6, /*max_total=*/9);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens_used, 3u);
}

TEST_F(StopCheckerTest, MultiByteCharactersSplitOverTokens) {
  // "€" is three bytes; fed one byte token at a time, nothing partial is streamed, and a stop string
  // made of it matches once the character completes.
  std::vector<int32_t> t = ids({"x"});
  for (uint8_t b : {uint8_t{0xE2}, uint8_t{0x82}, uint8_t{0xAC}}) {
    const std::optional<int32_t> id = tok_->token_id(byte_to_unicode(b));  // the byte's own token
    ASSERT_TRUE(id.has_value());
    t.push_back(*id);
  }
  Run r = run(params(), t);
  EXPECT_EQ(r.text, "x\xE2\x82\xAC");
  for (const std::string& d : r.deltas) EXPECT_TRUE(d.empty() || d == "x" || d == "\xE2\x82\xAC") << d;
  r = run(params({"\xE2\x82\xAC"}), t);
  EXPECT_EQ(r.text, "x");
  EXPECT_EQ(r.finish, FinishReason::kStop);
}

}  // namespace
}  // namespace minfer
