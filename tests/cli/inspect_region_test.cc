// `gpushare inspect region FILE` on regions made by the interposer's own region code
// (interpose/region.h): devices, limits, usage and process slots (alive and dead); truncated,
// foreign, other-version files and directories refused with a clear message; and never blocked
// by the region's lock (held by a "container" process while the command runs).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "interpose/region.h"
#include "tests/cli/run_process.h"

namespace gpushare {
namespace {

namespace ip = interpose;
using testing::RunProcess;

const uint8_t kUuid[16] = {0x9a, 0x7b, 0xbd, 0x4e, 0x61, 0xf3, 0xeb, 0xb3,
                           0x5a, 0xc3, 0x1b, 0x48, 0x6d, 0xeb, 0x0c, 0xdb};

std::string Bin() {
  return std::string(GPUSHARE_BIN_DIR) + "/gpushare";
}

std::string Dir() {
  const std::string d = ::testing::TempDir() + "/region-" + std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return d;
}

// A pid that no longer runs (a child that exited and was reaped).
int32_t DeadPid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return p;
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class RegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = Dir() + "/region";
    std::filesystem::remove(path_);
    char err[256] = {};
    ASSERT_TRUE(region_.Attach(path_.c_str(), err, sizeof err)) << err;
    const int slot = region_.RegisterProcess(::getpid(), ip::ProcStartTime(::getpid()));
    ASSERT_GE(slot, 0);
    ip::DeviceLimits lim;
    lim.memory_limited = true;
    lim.memory_limit = uint64_t{4} << 30;
    lim.sm_limit = 50;
    const int dev = region_.FindOrAddDevice(kUuid, lim);
    ASSERT_GE(dev, 0);
    ASSERT_EQ(region_.Reserve(slot, dev, uint64_t{3} << 29), ip::ReserveResult::kOk);  // 1.5 GiB
    ASSERT_EQ(region_.Reserve(slot, dev, uint64_t{3} << 30), ip::ReserveResult::kOverLimit);
    // A process that died without unregistering (its slot not yet reclaimed).
    dead_ = DeadPid();
    const int other = region_.RegisterProcess(dead_, 12345);
    ASSERT_GE(other, 0);
    region_.Charge(other, dev, 1 << 20);
  }
  void TearDown() override { region_.Detach(); }

  std::string path_;
  ip::Region region_;
  int32_t dead_ = 0;
};

TEST_F(RegionTest, PrintsDevicesAndProcesses) {
  auto r = RunProcess({Bin(), "inspect", "region", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layout version 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ready"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9a7bbd4e-61f3-ebb3-5ac3-1b486deb0cdb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4294967296 (4.0 GiB)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1611661312 (1.5 GiB)"), std::string::npos) << r.out;  // 1.5 GiB + 1 MiB
  EXPECT_NE(r.out.find("50%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(::getpid()) + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alive   dev0=1610612736"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(dead_) + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dead    dev0=1048576"), std::string::npos) << r.out;
  // One refusal (the reservation over the limit).
  EXPECT_NE(r.out.find("1             0"), std::string::npos) << r.out;
}

TEST_F(RegionTest, NeverTakesTheRegionsLock) {
  ASSERT_EQ(pthread_mutex_lock(&region_.file()->header.mutex), 0);
  testing::Child c({Bin(), "inspect", "region", path_});
  bool exited = false;
  for (int i = 0; i < 500 && !exited; ++i) {  // 10 s
    exited = c.Exited();
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pthread_mutex_unlock(&region_.file()->header.mutex);
  ASSERT_TRUE(exited) << "inspect region waited for the region's lock";
  EXPECT_EQ(c.Wait().exit_code, 0);
}

TEST_F(RegionTest, BadFilesAreRefusedClearly) {
  const std::string good = Bytes(path_);
  const std::string dir = Dir();
  struct Bad {
    std::string name;
    std::string bytes;
    std::string error;
  };
  std::string other = good;
  const uint32_t v2 = 2;
  std::memcpy(other.data() + offsetof(ip::RegionHeader, layout_version), &v2, sizeof v2);
  std::string garbage(good.size(), 'x');
  for (const Bad& b : std::vector<Bad>{
           {"truncated", good.substr(0, 100),
            "truncated: 100 bytes, a region has " + std::to_string(sizeof(ip::RegionFile))},
           {"tiny", "KSH", "not a gpushare accounting region (3 bytes)"},
           {"empty", "", "not a gpushare accounting region (0 bytes)"},
           {"garbage", garbage, "not a gpushare accounting region (no region magic)"},
           {"version", other, "region layout version 2; this gpushare reads 1"},
       }) {
    const std::string p = dir + "/" + b.name;
    Write(p, b.bytes);
    auto r = RunProcess({Bin(), "inspect", "region", p});
    EXPECT_EQ(r.exit_code, 2) << b.name;
    EXPECT_NE(r.err.find(p + ": " + b.error), std::string::npos) << b.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << b.name;
  }
  auto r = RunProcess({Bin(), "inspect", "region", dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  r = RunProcess({Bin(), "inspect", "region", dir + "/missing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  r = RunProcess({Bin(), "inspect", "region"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace gpushare
