// How much memory this process may still take: the kernel's MemAvailable, less the file pages this process has
// mapped and uses (its weights, which MemAvailable counts as reclaimable), and the room left under its cgroup's
// memory limit (v2 memory.max, v1 memory.limit_in_bytes, the tightest of its ancestors'), read once at start-up.
// A memory budget is checked against it, so a server is refused at start instead of killed by the kernel once
// traffic fills its lazily reserved KV pool.
#pragma once

#include <cstdint>
#include <string>

namespace minfer {

struct SystemMemory {
  int64_t mem_available = 0;  // /proc/meminfo MemAvailable
  int64_t mapped_in_use = 0;  // /proc/self/status RssFile
  int64_t cgroup_limit = -1;  // -1: no limit found
  int64_t cgroup_room = -1;   // limit less usage (reclaimable file pages not counted as used); -1: no limit
  std::string cgroup_dir;     // where the limit was read

  // What may still be taken: min(MemAvailable - RssFile, the cgroup's room); at least 0.
  int64_t available() const;
  // "12345 MiB available (MemAvailable 13000 MiB less 655 MiB of mapped weights; cgroup limit 16384 MiB at ...)".
  std::string describe() const;
};

// Reads the current figures. MINFER_CGROUP_MEMORY_DIR names a directory holding memory.max and memory.current to
// use instead of the process's own cgroup (a simulated container limit, for tests).
SystemMemory read_system_memory();

}  // namespace minfer
