// A read-only memory map of a whole file. Weights are used in place from the map (no copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace minfer {

class MappedFile {
 public:
  // Throws LoadError naming the path if the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

  // Drops the whole pages of [p, p + bytes) from the process's resident memory if they lie in a live file map;
  // memory anywhere else (heap, another map) is left alone. The map is private and read-only, so nothing is
  // lost: the pages stay in the page cache and a later read maps them back. For checkpoint weights the engine
  // has copied into its own layout, which would otherwise stay resident a second time.
  static void release_pages(const void* p, size_t bytes);

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Reads a whole (small) text file; throws LoadError naming the path.
std::string read_text_file(const std::string& path);

}  // namespace minfer
