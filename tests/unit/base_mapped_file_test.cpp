#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/mapped_file.h"

namespace minfer {
namespace {

// A file of `bytes` bytes, byte i = i * 7 mod 251 (no page looks like another).
std::string write_pattern_file(size_t bytes) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("minfer_mapped_" + std::to_string(::getpid()) + ".bin")).string();
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 7 % 251);
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
  return path;
}

// Releasing the pages of a range of a live map (whole pages inside it, unaligned ends, the whole file) loses
// nothing: every byte reads back as in the file.
TEST(MappedFile, ReleasedPagesReadBackFromTheFile) {
  const size_t bytes = 5 * 4096 + 123;
  const std::string path = write_pattern_file(bytes);
  {
    const auto file = MappedFile::open(path);
    ASSERT_EQ(file->size(), bytes);
    auto check = [&] {
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(file->data()[i], static_cast<uint8_t>(i * 7 % 251)) << i;
    };
    check();
    MappedFile::release_pages(file->data() + 100, 3 * 4096);
    check();
    MappedFile::release_pages(file->data(), bytes);
    check();
  }
  std::filesystem::remove(path);
}

// The kB of file-backed memory this process has resident (RssFile in /proc/self/status).
int64_t resident_file_kb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kb = -1;
  while (status >> key) {
    if (key == "RssFile:") {
      status >> kb;
      break;
    }
  }
  return kb;
}

// What the release is for: a 16 MiB map read through is resident; released, it is not (the load drops checkpoint
// weights it has copied into its own layout this way).
TEST(MappedFile, ReleasedPagesLeaveTheResidentSet) {
  const size_t bytes = size_t{16} << 20;
  const std::string path = write_pattern_file(bytes);
  {
    const auto file = MappedFile::open(path);
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes; i += 4096) sum += file->data()[i];
    EXPECT_GT(sum, 0u);
    const int64_t before = resident_file_kb();
    ASSERT_GT(before, 0) << "no RssFile in /proc/self/status";
    MappedFile::release_pages(file->data(), bytes);
    EXPECT_LT(resident_file_kb(), before - 12 * 1024);
  }
  std::filesystem::remove(path);
}

// Memory outside any file map is never touched: releasing a heap buffer (whose pages madvise would zero) or a
// range running past the end of a map is a no-op.
TEST(MappedFile, ReleaseLeavesOtherMemoryAlone) {
  std::vector<uint8_t> heap(64 * 4096, 0x5a);
  MappedFile::release_pages(heap.data(), heap.size());
  for (uint8_t b : heap) ASSERT_EQ(b, 0x5a);

  const std::string path = write_pattern_file(3 * 4096);
  {
    const auto file = MappedFile::open(path);
    MappedFile::release_pages(file->data() + 4096, 3 * 4096);  // runs past the end: refused as a whole
    for (size_t i = 0; i < file->size(); ++i) ASSERT_EQ(file->data()[i], static_cast<uint8_t>(i * 7 % 251));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace minfer
