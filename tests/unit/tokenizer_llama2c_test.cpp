// llama2.c's tok512.bin (stories260K): the prompt check run.c and llama.cpp agree on, the decode of run.c's
// greedy output, and agreement with the same vocabulary read from stories260K.gguf.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

const std::string kDir = std::string(MINFER_SHARED_DIR) + "/models/stories260K";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Llama2cTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kDir + "/tok512.bin")) GTEST_SKIP() << kDir << "/tok512.bin missing";
    tok_ = tokenizer_from_llama2c(kDir + "/tok512.bin");
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Llama2cTokenizer, Vocabulary) {
  EXPECT_EQ(tok_->vocab_size(), 512);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tok_->adds_bos());
  EXPECT_TRUE(tok_->is_special(1));
  EXPECT_FALSE(tok_->is_special(403));
  EXPECT_EQ(tok_->token_text(403), "\xE2\x96\x81Once");  // llama2.c's " Once", back in SentencePiece form
  EXPECT_EQ(tok_->token_bytes(403), " Once");
  EXPECT_EQ(tok_->token_bytes(13), "\n");  // <0x0A>
}

TEST_F(Llama2cTokenizer, PromptMatchesRunC) {
  EXPECT_EQ(tok_->encode("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok_->encode("Once upon a time", /*add_special=*/false), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(tok_->encode(""), std::vector<int32_t>{1});
}

TEST_F(Llama2cTokenizer, DecodesGreedyOutput) {
  std::vector<int32_t> ids;
  std::istringstream in(read_file(kDir + "/greedy_t0_n200.ids"));
  for (int32_t id; in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 200u);
  // run.c prints the tokens after BOS (dropping the first one's leading space, as decode does) and then a
  // final "\n", which is the last byte of the expected file.
  const std::string expected = read_file(kDir + "/expected_greedy_n200.txt");
  EXPECT_EQ(tok_->decode(ids) + "\n", expected);
  // With BOS in front the text is the same once BOS is skipped.
  std::vector<int32_t> with_bos = {1};
  with_bos.insert(with_bos.end(), ids.begin(), ids.end());
  EXPECT_EQ(tok_->decode(with_bos, /*skip_special=*/true) + "\n", expected);
  // And encoding the text gives back the same ids (the model's output is tokenizer-canonical here).
  EXPECT_EQ(tok_->encode(expected.substr(0, expected.size() - 1), /*add_special=*/false), ids);
}

TEST_F(Llama2cTokenizer, SameAsGgufVocabulary) {
  const std::string gguf_path = kDir + "/stories260K.gguf";
  if (!std::filesystem::exists(gguf_path)) GTEST_SKIP() << gguf_path << " missing";
  auto gguf_tok = tokenizer_from_gguf(*GgufFile::open(gguf_path));
  ASSERT_EQ(gguf_tok->vocab_size(), tok_->vocab_size());
  for (const char* text : {"Once upon a time", "Lily and Ben went to the park.\nThey saw a big dog!",
                           "  spaces   here ", "ünïcode and 🦙", "\"Hello,\" said Tom. \"Can I play?\""}) {
    const auto a = tok_->encode(text);
    EXPECT_EQ(a, gguf_tok->encode(text)) << text;
    EXPECT_EQ(tok_->decode(a, /*skip_special=*/true), text);
    EXPECT_EQ(gguf_tok->decode(a, /*skip_special=*/true), text);
  }
}

}  // namespace
}  // namespace minfer
