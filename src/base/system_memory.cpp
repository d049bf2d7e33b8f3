#include "base/system_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace minfer {
namespace {

namespace fs = std::filesystem;

// The value of `key` (e.g. "MemAvailable:") in a "key value [kB]" file, in bytes when its unit is kB; -1 if absent.
int64_t keyed_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string k, unit;
    int64_t value = 0;
    if (fields >> k >> value && k == key) return (fields >> unit && unit == "kB") ? value * 1024 : value;
  }
  return -1;
}

// A one-number file (memory.max reads "max" when unlimited: -1).
int64_t number_file(const fs::path& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  char* end = nullptr;
  const long long v = std::strtoll(word.c_str(), &end, 10);
  return end && *end == '\0' ? v : -1;
}

// One cgroup directory's limit and room (v2 or v1 file names); false when it sets no limit.
bool cgroup_level(const fs::path& dir, int64_t& limit, int64_t& room) {
  const bool v2 = fs::exists(dir / "memory.max");
  limit = number_file(dir / (v2 ? "memory.max" : "memory.limit_in_bytes"));
  if (limit < 0 || limit >= (int64_t{1} << 60)) return false;  // v1 writes "unlimited" as a huge number
  const int64_t usage = number_file(dir / (v2 ? "memory.current" : "memory.usage_in_bytes"));
  const int64_t inactive_file =
      keyed_value((dir / "memory.stat").string(), v2 ? "inactive_file" : "total_inactive_file");
  room = limit - std::max<int64_t>(0, usage) + std::max<int64_t>(0, inactive_file);
  return true;
}

// The process's memory cgroup directory: the v2 entry ("0::/path") or the v1 memory controller's.
fs::path own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  fs::path v2, v1;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) v2 = fs::path("/sys/fs/cgroup") / path.substr(1);
    if (controllers == "memory") v1 = fs::path("/sys/fs/cgroup/memory") / path.substr(1);
  }
  // In a container the hierarchy is often mounted from a subtree the listed path starts above: the first of the
  // path's suffixes that exists under the mount.
  for (const fs::path& listed : {v1, v2}) {
    if (listed.empty()) continue;
    const fs::path mount = listed == v1 ? fs::path("/sys/fs/cgroup/memory") : fs::path("/sys/fs/cgroup");
    fs::path rel = listed.lexically_relative(mount);
    while (!rel.empty() && rel != ".") {
      if (fs::exists(mount / rel)) return mount / rel;
      rel = rel.lexically_relative(*rel.begin());
    }
  }
  return !v1.empty() && fs::exists(v1) ? v1 : v2;
}

// The tightest limit from the cgroup's directory up to the hierarchy's root.
void read_cgroup(SystemMemory& m) {
  if (const char* sim = std::getenv("MINFER_CGROUP_MEMORY_DIR")) {
    int64_t limit = 0, room = 0;
    if (cgroup_level(sim, limit, room)) m.cgroup_limit = limit, m.cgroup_room = room, m.cgroup_dir = sim;
    return;
  }
  for (fs::path dir = own_cgroup(); !dir.empty() && dir.string().starts_with("/sys/fs/cgroup");
       dir = dir.parent_path()) {
    int64_t limit = 0, room = 0;
    if (fs::exists(dir) && cgroup_level(dir, limit, room) && (m.cgroup_room < 0 || room < m.cgroup_room)) {
      m.cgroup_limit = limit;
      m.cgroup_room = room;
      m.cgroup_dir = dir.string();
    }
    if (dir == dir.parent_path()) break;
  }
}

}  // namespace

int64_t SystemMemory::available() const {
  int64_t avail = std::max<int64_t>(0, mem_available - mapped_in_use);
  if (cgroup_room >= 0) avail = std::min(avail, cgroup_room);
  return std::max<int64_t>(0, avail);
}

std::string SystemMemory::describe() const {
  std::string s = fmt::format("{} MiB available (MemAvailable {} MiB less {} MiB of mapped files in use",
                              available() >> 20, mem_available >> 20, mapped_in_use >> 20);
  if (cgroup_room >= 0)
    s += fmt::format("; cgroup limit {} MiB with {} MiB left, {})", cgroup_limit >> 20, cgroup_room >> 20, cgroup_dir);
  else
    s += "; no cgroup memory limit)";
  return s;
}

SystemMemory read_system_memory() {
  SystemMemory m;
  m.mem_available = std::max<int64_t>(0, keyed_value("/proc/meminfo", "MemAvailable:"));
  m.mapped_in_use = std::max<int64_t>(0, keyed_value("/proc/self/status", "RssFile:"));
  read_cgroup(m);
  return m;
}

}  // namespace minfer
