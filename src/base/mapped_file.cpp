#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "base/error.h"

namespace minfer {
namespace {

// The live maps (start -> size), so release_pages only ever advises file maps. Never destroyed: a MappedFile held
// by a static (or by a Python object freed at interpreter exit) may unregister after static destructors ran.
struct MapRegistry {
  std::mutex mutex;
  std::map<uintptr_t, size_t> maps;
};
MapRegistry& registry() {
  static auto* r = new MapRegistry;
  return *r;
}

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_load(path, "cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail_load(path, "cannot stat: {}", std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail_load(path, "is a directory, expected a file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail_load(path, "cannot mmap {} bytes: {}", size, std::strerror(err));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  if (data != nullptr) {
    const std::lock_guard lock(registry().mutex);
    registry().maps[reinterpret_cast<uintptr_t>(data)] = size;
  }
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  {
    const std::lock_guard lock(registry().mutex);
    registry().maps.erase(reinterpret_cast<uintptr_t>(data_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::release_pages(const void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const std::lock_guard lock(registry().mutex);  // the map cannot go away meanwhile
  auto it = registry().maps.upper_bound(begin);
  if (it == registry().maps.begin()) return;
  --it;  // the last map starting at or before p
  if (end > it->first + it->second) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages only
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_load(path, "cannot open: {}", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace minfer
