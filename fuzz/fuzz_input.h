// What the fuzz targets share: the readers under test take paths (they map files), so each input is written to
// one file per process in /dev/shm (memory, not disk) and opened from there. A target's clean outcome for a bad
// input is minfer::Error (a LoadError naming the file); anything else that escapes (another exception, a crash,
// a sanitizer report) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace minfer::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* extension) {
  const std::string path = "/dev/shm/minfer_fuzz_" + std::to_string(::getpid()) + "." + extension;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace minfer::fuzz
