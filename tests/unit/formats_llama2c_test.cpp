#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "formats/llama2c_file.h"
#include "test_support.h"

namespace minfer {
namespace {

using testing::expect_load_error;

namespace fs = std::filesystem;

const std::string kStories = std::string(MINFER_SHARED_DIR) + "/models/stories260K/stories260K.bin";

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("minfer_l2c_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Llama2cFile, ReadsStories260K) {
  auto f = Llama2cFile::open(kStories);
  const Llama2cHeader& h = f->header();
  EXPECT_EQ(h.dim, 64);
  EXPECT_EQ(h.hidden_dim, 172);
  EXPECT_EQ(h.n_layers, 5);
  EXPECT_EQ(h.n_heads, 8);
  EXPECT_EQ(h.n_kv_heads, 4);
  EXPECT_EQ(h.vocab_size, 512);
  EXPECT_EQ(h.seq_len, 512);
  EXPECT_TRUE(h.shared_classifier);
  const auto& t = f->tensors();
  EXPECT_EQ(t.count("wcls"), 0u);
  EXPECT_EQ(t.count("freq_cis_real"), 0u);
  EXPECT_EQ(t.at("token_embedding").shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(t.at("wk").shape, (std::vector<int64_t>{5, 32, 64}));
  EXPECT_EQ(t.at("w2").shape, (std::vector<int64_t>{5, 64, 172}));
  // Laid out back to back in the map: rms_att follows the embedding.
  EXPECT_EQ(t.at("rms_att").as<float>(), t.at("token_embedding").as<float>() + 512 * 64);
  const Tensor l3 = f->layer_slice("wq", 3);
  EXPECT_EQ(l3.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l3.as<float>(), t.at("wq").as<float>() + 3 * 64 * 64);
}

TEST(Llama2cFile, TruncatedFile) {
  const std::string p = temp_path("trunc.bin");
  fs::copy_file(kStories, p, fs::copy_options::overwrite_existing);
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(p, fs::file_size(p) - 100);
  expect_load_error([&] { Llama2cFile::open(p); }, p, "truncated llama2.c checkpoint");
  fs::resize_file(p, 20);
  expect_load_error([&] { Llama2cFile::open(p); }, p, "truncated llama2.c checkpoint");
  fs::remove(p);
}

TEST(Llama2cFile, RejectsWhatIsNotALlama2cFile) {
  const std::string p = temp_path("junk.bin");
  {
    std::ofstream out(p, std::ios::binary);
    out << "this is a text file, not a checkpoint at all";
  }
  expect_load_error([&] { Llama2cFile::open(p); }, p, "not a llama2.c checkpoint");
  {
    std::ofstream out(p, std::ios::binary);
    const int32_t v1[7] = {0x616b3432, 1, 0, 0, 0, 0, 0};
    out.write(reinterpret_cast<const char*>(v1), sizeof(v1));
  }
  expect_load_error([&] { Llama2cFile::open(p); }, p, "export version 1 is not supported");
  // Extra bytes after the weights.
  fs::copy_file(kStories, p, fs::copy_options::overwrite_existing);
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(p, fs::file_size(p) + 4);
  expect_load_error([&] { Llama2cFile::open(p); }, p, "4 bytes more than the header");
  fs::remove(p);
}

}  // namespace
}  // namespace minfer
