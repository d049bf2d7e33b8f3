// Structured outputs (llguidance) and the other logit controls (logit_bias, min_tokens) on the real
// stories260K model, sampled at temperature 1 so the model would wander off the language without the mask.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/structured_output.h"
#include "engine_test_support.h"
#include "minfer/engine.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace minfer {
namespace {

// Whether all of text matches pattern, by PCRE2 (an oracle apart from llguidance's regex engine; std::regex
// trips GCC 12's -Wmaybe-uninitialized in the sanitizer build).
bool full_match(const std::string& pattern, const std::string& text) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), PCRE2_ZERO_TERMINATED,
                                 PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF, &error, &offset, nullptr);
  if (!re) return false;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, match, nullptr);
  pcre2_match_data_free(match);
  pcre2_code_free(re);
  return rc >= 0;
}

SamplingParams sampled(int32_t max_tokens, uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = max_tokens;
  p.seed = seed;
  return p;
}

SamplingParams constrained(StructuredOutputs::Kind kind, std::string spec, uint64_t seed, int32_t max_tokens = 200) {
  SamplingParams p = sampled(max_tokens, seed);
  p.structured_outputs = StructuredOutputs{kind, std::move(spec)};
  return p;
}

CompletionOutput run(Engine& engine, const SamplingParams& p, const std::string& prompt = "Once upon a time") {
  return engine.generate(std::vector<std::string>{prompt}, p)[0];
}

// The scalar meaning of the mask: bit (id % 32) of word id / 32; ids past the mask are forbidden.
TEST(StructuredOutput, TokenMaskMatchesItsDefinition) {
  std::mt19937 rng(7);
  for (size_t vocab : {1u, 31u, 32u, 33u, 100u, 1000u, 4099u}) {
    for (size_t words : {(vocab + 31) / 32, (vocab + 31) / 32 + 1, vocab / 32}) {
      std::vector<uint32_t> mask(words);
      for (uint32_t& w : mask) w = rng() & rng();  // sparse-ish
      if (!mask.empty()) mask[0] = 0xFFFFFFFFu;    // and one full word
      std::vector<float> logits(vocab);
      for (float& l : logits) l = static_cast<float>(rng() % 1000) / 100.0f;
      const std::vector<float> before = logits;
      apply_token_mask(logits, mask);
      for (size_t i = 0; i < vocab; ++i) {
        const bool allowed = i / 32 < mask.size() && (mask[i / 32] >> (i % 32) & 1u);
        EXPECT_EQ(logits[i], allowed ? before[i] : -std::numeric_limits<float>::infinity()) << vocab << " " << i;
      }
    }
  }
}

TEST(StructuredOutput, RegexHoldsUnderSampling) {
  Engine engine(testing::small_engine_config());
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const CompletionOutput out =
        run(engine, constrained(StructuredOutputs::Kind::kRegex, "[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\\.", seed));
    EXPECT_EQ(out.finish_reason, FinishReason::kStop) << out.text;
    EXPECT_TRUE(full_match("[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\\.", out.text))
        << "seed " << seed << ": '" << out.text << "'";
  }
}

TEST(StructuredOutput, ChoicePicksOneOfTheStrings) {
  Engine engine(testing::small_engine_config());
  const std::set<std::string> choices = {"Lily", "Tim", "the big dog", "a \"quoted\" cat"};
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const CompletionOutput out = run(
        engine,
        constrained(StructuredOutputs::Kind::kChoice, R"(["Lily", "Tim", "the big dog", "a \"quoted\" cat"])", seed));
    EXPECT_TRUE(choices.count(out.text)) << out.text;
  }
}

TEST(StructuredOutput, JsonSchemaOutputsValidate) {
  Engine engine(testing::small_engine_config());
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
      "pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}}, "required": ["kind"],
              "additionalProperties": false}
    },
    "required": ["name", "age", "tags", "pet"],
    "additionalProperties": false})";
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const CompletionOutput out = run(engine, constrained(StructuredOutputs::Kind::kJsonSchema, schema, seed, 400));
    ASSERT_EQ(out.finish_reason, FinishReason::kStop) << out.text;
    const nlohmann::json j = nlohmann::json::parse(out.text);
    ASSERT_TRUE(j.is_object()) << out.text;
    EXPECT_EQ(j.size(), 4u) << out.text;
    const std::string name = j.at("name").get<std::string>();
    EXPECT_TRUE(!name.empty() && name.size() <= 12 * 4) << out.text;  // maxLength counts characters
    EXPECT_TRUE(j.at("age").is_number_integer() && j["age"] >= 0 && j["age"] <= 120) << out.text;
    EXPECT_TRUE(j.at("tags").is_array() && !j["tags"].empty() && j["tags"].size() <= 3) << out.text;
    for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == "c") << out.text;
    EXPECT_EQ(j.at("pet").size(), 1u) << out.text;
    EXPECT_TRUE(j["pet"]["kind"] == "cat" || j["pet"]["kind"] == "dog") << out.text;
  }
}

TEST(StructuredOutput, JsonObjectAndLarkGrammar) {
  Engine engine(testing::small_engine_config());
  const CompletionOutput obj = run(engine, constrained(StructuredOutputs::Kind::kJsonObject, "", 3, 300));
  if (obj.finish_reason == FinishReason::kStop) {
    EXPECT_TRUE(nlohmann::json::parse(obj.text).is_object()) << obj.text;
  }
  EXPECT_EQ(obj.text.substr(0, 1), "{") << obj.text;
  const CompletionOutput lark =
      run(engine, constrained(StructuredOutputs::Kind::kGrammar, "start: \"x=\" NUM \";\"\nNUM: /[0-9]{1,4}/", 5));
  EXPECT_TRUE(full_match("x=[0-9]{1,4};", lark.text)) << lark.text;
}

TEST(StructuredOutput, InvalidSpecsAreInvalidArgumentErrorsWithLlguidancesMessage) {
  Engine engine(testing::small_engine_config());
  const struct {
    StructuredOutputs::Kind kind;
    const char* spec;
  } bad[] = {
      {StructuredOutputs::Kind::kJsonSchema, R"({"type": "objekt"})"},
      {StructuredOutputs::Kind::kJsonSchema, "{not json"},
      {StructuredOutputs::Kind::kRegex, "[a-"},
      {StructuredOutputs::Kind::kGrammar, "start: undefined_rule"},
      {StructuredOutputs::Kind::kChoice, "[]"},
  };
  for (const auto& b : bad) {
    try {
      engine.add_request("Once", constrained(b.kind, b.spec, 1));
      ADD_FAILURE() << "accepted " << b.spec;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_THAT(e.what(), ::testing::HasSubstr("structured outputs")) << e.what();
    }
  }
  EXPECT_FALSE(engine.has_unfinished());
}

// A constrained request batched with unconstrained ones changes nothing for them.
TEST(StructuredOutput, UnconstrainedNeighboursAreUnaffected) {
  const SamplingParams plain = testing::greedy(40);
  Engine alone(testing::small_engine_config());
  const std::vector<int32_t> expected = run(alone, plain).token_ids;
  Engine engine(testing::small_engine_config());
  const RequestId a = engine.add_request("Once upon a time", plain);
  engine.add_request("Once upon a time", constrained(StructuredOutputs::Kind::kRegex, "[a-z ]{10,30}\\.", 1));
  const RequestId b = engine.add_request("Once upon a time", plain);
  std::vector<int32_t> got_a, got_b;
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      if (o.id == a) got_a.insert(got_a.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.id == b) got_b.insert(got_b.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  EXPECT_EQ(got_a, expected);
  EXPECT_EQ(got_b, expected);
}

TEST(LogitControls, LogitBiasForcesAndBans) {
  Engine engine(testing::small_engine_config());
  const std::vector<int32_t> greedy_ids = run(engine, testing::greedy(10)).token_ids;
  SamplingParams ban = testing::greedy(10);
  ban.logit_bias = {{greedy_ids[0], -100.0f}};
  EXPECT_NE(run(engine, ban).token_ids[0], greedy_ids[0]);
  SamplingParams force = sampled(10, 1);
  force.logit_bias = {{300, 100.0f}};
  EXPECT_EQ(run(engine, force).token_ids, std::vector<int32_t>(10, 300));
}

TEST(LogitControls, MinTokensHoldsBackEosAndStops) {
  Engine engine(testing::small_engine_config());
  SamplingParams p = testing::greedy(20, /*stop_at_eos=*/true);
  p.logit_bias = {{2, 100.0f}};  // EOS (id 2) would come first
  EXPECT_EQ(run(engine, p).token_ids.size(), 1u);
  p.min_tokens = 5;
  const CompletionOutput out = run(engine, p);
  EXPECT_EQ(out.token_ids.size(), 6u);  // 5 tokens, then the EOS they held back
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  p.max_tokens = 4;
  EXPECT_THROW(engine.add_request("Once", p), Error);  // min_tokens > max_tokens
}

}  // namespace
}  // namespace minfer
