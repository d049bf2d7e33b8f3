// What a memory budget is checked against: MemAvailable less the mapped files in use, and the room under a cgroup
// limit, here a simulated one (MINFER_CGROUP_MEMORY_DIR: a directory with memory.max, memory.current and
// memory.stat, as cgroup v2 writes them). The engine's refusal of a budget beyond it is in engine_api_test and, with
// a real cgroup, tests/e2e/test_memory_limits.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/system_memory.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

class SimulatedCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_cgroup_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::setenv("MINFER_CGROUP_MEMORY_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("MINFER_CGROUP_MEMORY_DIR");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST(SystemMemory, ReadsThisMachine) {
  const SystemMemory m = read_system_memory();
  EXPECT_GT(m.mem_available, 0);
  EXPECT_LE(m.available(), m.mem_available);
  EXPECT_NE(m.describe().find("MemAvailable"), std::string::npos);
}

TEST_F(SimulatedCgroup, TheRoomUnderTheLimitBoundsWhatIsAvailable) {
  // 1 GiB limit, 700 MiB used of which 100 MiB is inactive page cache (reclaimable): 424 MiB of room.
  write(dir_ / "memory.max", "1073741824\n");
  write(dir_ / "memory.current", std::to_string(700ll << 20) + "\n");
  write(dir_ / "memory.stat", "anon 600\ninactive_file " + std::to_string(100ll << 20) + "\nactive_file 0\n");
  const SystemMemory m = read_system_memory();
  EXPECT_EQ(m.cgroup_limit, 1ll << 30);
  EXPECT_EQ(m.cgroup_room, 424ll << 20);
  EXPECT_EQ(m.available(), std::min<int64_t>(424ll << 20, m.mem_available - m.mapped_in_use));
  EXPECT_NE(m.describe().find("cgroup limit 1024 MiB with 424 MiB left"), std::string::npos) << m.describe();
}

TEST_F(SimulatedCgroup, NoLimitLeavesMemAvailable) {
  write(dir_ / "memory.max", "max\n");
  write(dir_ / "memory.current", "123\n");
  const SystemMemory m = read_system_memory();
  EXPECT_EQ(m.cgroup_room, -1);
  EXPECT_EQ(m.available(), std::max<int64_t>(0, m.mem_available - m.mapped_in_use));
  EXPECT_NE(m.describe().find("no cgroup memory limit"), std::string::npos);
}

}  // namespace
}  // namespace minfer
