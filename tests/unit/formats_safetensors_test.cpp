#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "formats/safetensors_file.h"
#include "formats/safetensors_writer.h"
#include "test_support.h"

namespace minfer {
namespace {

using testing::expect_load_error;

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with the given header text and `data_bytes` bytes of data.
  std::string raw_file(const std::string& name, const std::string& header, size_t data_bytes, int64_t len = -1) {
    std::ofstream out(path(name), std::ios::binary);
    const uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
    return path(name);
  }

  fs::path dir_;
};

Tensor f32_tensor(std::vector<int64_t> shape, float start) {
  Tensor t = Tensor::allocate(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST_F(SafetensorsTest, RoundTripKeepsValuesAndAlignsEveryTensor) {
  Tensor a = f32_tensor({3, 5}, 1.0f);
  Tensor b = convert(f32_tensor({7}, -3.0f), DType::BF16);  // odd byte count before an f32 would misalign it
  Tensor c = f32_tensor({2, 2, 2}, 100.0f);
  write_safetensors(path("m.safetensors"),
                    {SafetensorsEntry::from_tensor("b", b), SafetensorsEntry::from_tensor("a", a),
                     SafetensorsEntry::from_tensor("c", c)},
                    {.metadata = {{"format", "pt"}}});
  auto f = SafetensorsFile::open(path("m.safetensors"));
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  for (const char* name : {"a", "b", "c"}) ASSERT_NE(f->find(name), nullptr) << name;
  const Tensor ra = f->tensor(*f->find("a"));
  const Tensor rb = f->tensor(*f->find("b"));
  const Tensor rc = f->tensor(*f->find("c"));
  EXPECT_EQ(ra.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(rb.dtype, DType::BF16);
  EXPECT_EQ(rc.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(std::memcmp(ra.data, a.data, a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(rb.data, b.data, b.nbytes()), 0);
  EXPECT_EQ(std::memcmp(rc.data, c.data, c.nbytes()), 0);
  // Viewed in place in the map, not copied, and aligned.
  EXPECT_EQ(ra.owner.get(), rc.owner.get());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ra.data) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(rc.data) % 4, 0u);
  EXPECT_FLOAT_EQ(bf16_to_f32(rb.as<uint16_t>()[3]), 0.0f);
}

TEST_F(SafetensorsTest, ReadsHeaderWrittenByHand) {
  // As the Python library writes it: __metadata__ first, I8 and I32 allowed.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
      R"("y":{"dtype":"I8","shape":[2,2],"data_offsets":[8,12]},"z":{"dtype":"F16","shape":[],"data_offsets":[12,14]}})";
  auto f = SafetensorsFile::open(raw_file("h.safetensors", header, 14));
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->find("x")->dtype, DType::I32);
  EXPECT_EQ(f->find("y")->dtype, DType::I8);
  EXPECT_EQ(f->find("z")->shape.size(), 0u);
  EXPECT_EQ(f->tensor(*f->find("z")).numel(), 1);
}

TEST_F(SafetensorsTest, MisalignedDataIsCopiedNotReadMisaligned) {
  // Header of 13 bytes: data starts at 21, so an F32 at offset 0 is misaligned in the map.
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string padded = header + std::string((4 - (8 + header.size()) % 4) % 4 + 1, ' ');
  auto f = SafetensorsFile::open(raw_file("mis.safetensors", padded, 4));
  const Tensor t = f->tensor(*f->find("a"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u);
  EXPECT_EQ(t.as<float>()[0], 0.0f);
}

TEST_F(SafetensorsTest, ShardedCheckpointWithIndex) {
  std::vector<SafetensorsEntry> entries;
  for (int i = 0; i < 5; ++i)
    entries.push_back(SafetensorsEntry::from_tensor(fmt::format("t{}", i), f32_tensor({16}, static_cast<float>(i))));
  const auto files = write_safetensors_checkpoint(dir_.string(), entries, 128);  // two 64-byte tensors a shard
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0], "model-00001-of-00003.safetensors");
  EXPECT_EQ(files[2], "model-00003-of-00003.safetensors");
  const auto map = read_safetensors_index(path("model.safetensors.index.json"));
  ASSERT_EQ(map.size(), 5u);
  EXPECT_EQ(map.at("t0"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(map.at("t4"), "model-00003-of-00003.safetensors");
  for (const auto& [name, file] : map) {
    auto f = SafetensorsFile::open(path(file));
    ASSERT_NE(f->find(name), nullptr);
    EXPECT_EQ(f->tensor(*f->find(name)).as<float>()[1], static_cast<float>(std::stoi(name.substr(1)) + 1));
  }
  const auto index = nlohmann::json::parse(std::ifstream(path("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 5 * 64);
}

TEST_F(SafetensorsTest, SkipDataWritesAFullSizeFile) {
  SafetensorsEntry e{"big", DType::BF16, {1024, 1024}, nullptr};
  write_safetensors(path("s.safetensors"), {e}, {.skip_data = true});
  auto f = SafetensorsFile::open(path("s.safetensors"));
  EXPECT_EQ(fs::file_size(path("s.safetensors")), f->data_offset() + 2u * 1024 * 1024);
  EXPECT_EQ(f->tensor(*f->find("big")).as<uint16_t>()[12345], 0);
}

TEST_F(SafetensorsTest, TruncatedFile) {
  write_safetensors(path("t.safetensors"), {SafetensorsEntry::from_tensor("a", f32_tensor({64}, 0))});
  fs::resize_file(path("t.safetensors"), fs::file_size(path("t.safetensors")) - 10);
  expect_load_error([&] { SafetensorsFile::open(path("t.safetensors")); }, path("t.safetensors"), "truncated");
  raw_file("tiny.safetensors", "", 0);
  fs::resize_file(path("tiny.safetensors"), 5);
  expect_load_error([&] { SafetensorsFile::open(path("tiny.safetensors")); }, path("tiny.safetensors"), "truncated");
}

TEST_F(SafetensorsTest, HeaderLengthBeyondFile) {
  const std::string p = raw_file("len.safetensors", "{}", 0, 1 << 20);
  expect_load_error([&] { SafetensorsFile::open(p); }, p, "header length 1048576 exceeds");
}

TEST_F(SafetensorsTest, InvalidHeaderJson) {
  const std::string p = raw_file("json.safetensors", R"({"a": {"dtype": "F32", )", 0);
  expect_load_error([&] { SafetensorsFile::open(p); }, p, "invalid safetensors header JSON");
  const std::string q = raw_file("arr.safetensors", "[1, 2]", 0);
  expect_load_error([&] { SafetensorsFile::open(q); }, q, "not an object");
  const std::string r = raw_file("noshape.safetensors", R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4);
  expect_load_error([&] { SafetensorsFile::open(r); }, r, "no \"shape\"");
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  const std::string p = raw_file("off.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  expect_load_error([&] { SafetensorsFile::open(p); }, p, "beyond the end of the file");
  const std::string q = raw_file("span.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16);
  expect_load_error([&] { SafetensorsFile::open(q); }, q, "span 12 bytes, but F32 [4] needs 16");
  const std::string r = raw_file("rev.safetensors", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 16);
  expect_load_error([&] { SafetensorsFile::open(r); }, r, "begin > end");
  const std::string s =
      raw_file("huge.safetensors", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4);
  expect_load_error([&] { SafetensorsFile::open(s); }, s, "is too large");
}

TEST_F(SafetensorsTest, UnsupportedDtype) {
  const std::string p = raw_file("f64.safetensors", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8);
  expect_load_error([&] { SafetensorsFile::open(p); }, p, "tensor 'w' has unsupported dtype F64");
}

TEST_F(SafetensorsTest, BadIndex) {
  std::ofstream(path("index.json")) << R"({"weight_map": {"a": "../../etc/passwd"}})";
  expect_load_error([&] { read_safetensors_index(path("index.json")); }, path("index.json"), "invalid shard file");
  std::ofstream(path("index2.json")) << R"({"metadata": {}})";
  expect_load_error([&] { read_safetensors_index(path("index2.json")); }, path("index2.json"), "no \"weight_map\"");
}

}  // namespace
}  // namespace minfer
