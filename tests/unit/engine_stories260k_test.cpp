// The whole model against an oracle nobody here wrote: llama2.c's reference run.c, greedy from BOS in f32,
// recorded as greedy_t0_n200.ids beside the real trained stories260K checkpoint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "engine_test_support.h"

namespace minfer {
namespace {

const std::string kDir = std::string(MINFER_SHARED_DIR) + "/models/stories260K/";

std::vector<int32_t> expected_ids() {
  // Whitespace-separated ids; parsed with strtol so no iostream is involved.
  const std::string text = minfer::read_text_file(kDir + "greedy_t0_n200.ids");
  std::vector<int32_t> ids;
  const char* cursor = text.c_str();
  char* end = nullptr;
  for (long id = std::strtol(cursor, &end, 10); end != cursor; id = std::strtol(cursor, &end, 10)) {
    ids.push_back(static_cast<int32_t>(id));
    cursor = end;
  }
  return ids;
}

std::vector<int32_t> greedy(const std::string& path, int threads, int64_t page_size) {
  EngineConfig config = testing::small_engine_config(path, threads);
  config.page_size = page_size;
  Engine engine(config);
  return engine.generate(std::vector<std::vector<int32_t>>{{1}}, testing::greedy(200))[0].token_ids;
}

TEST(Stories260K, GreedyFromBosMatchesLlama2cReference) {
  const std::vector<int32_t> expected = expected_ids();
  ASSERT_EQ(expected.size(), 200u);
  EXPECT_EQ(greedy(kDir + "stories260K.bin", 2, 16), expected);
}

TEST(Stories260K, GgufGivesTheSameTokens) { EXPECT_EQ(greedy(kDir + "stories260K.gguf", 2, 16), expected_ids()); }

TEST(Stories260K, PageSizeAndThreadsDoNotChangeTokens) {
  const std::vector<int32_t> expected = expected_ids();
  EXPECT_EQ(greedy(kDir + "stories260K.bin", 1, 8), expected);
  EXPECT_EQ(greedy(kDir + "stories260K.bin", 3, 64), expected);
}

TEST(Stories260K, PromptEncodesAndGeneratesText) {
  Engine engine(testing::small_engine_config(kDir + "stories260K.bin"));
  const std::vector<int32_t> prompt = engine.encode("Once upon a time");
  EXPECT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  const std::string text =
      engine.generate(std::vector<std::vector<int32_t>>{prompt}, testing::greedy(20, /*stop_at_eos=*/true))[0].text;
  // The recorded greedy run from BOS starts with this prompt, so greedy after it continues the same story.
  const std::string expected = minfer::read_text_file(kDir + "expected_greedy_n200.txt");
  ASSERT_GT(expected.size(), 40u);
  EXPECT_EQ(text.substr(0, 20), expected.substr(std::string("Once upon a time").size(), 20));
}

}  // namespace
}  // namespace minfer
