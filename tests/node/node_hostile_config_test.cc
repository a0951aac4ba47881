// The real gpushare-node, reloaded (SIGHUP) with hostile and mistaken configs: 1,000
// overlapping sharing entries (which took the agent from 23 MB to 615 MB), the largest document
// the value limit lets through, a file of 12 MB, a document of 1 MiB with too many YAML values,
// a directory and a FIFO in place of the file.
// Each reload must be refused with a bounded list of problems, the peak resident set of the
// agent (VmHWM in /proc/<pid>/status) must stay within its own serving peak plus what one read
// may hold (tests/config/input_files.h: InputMemoryBoundKib, measured in the same build), and in
// the normal build under the DaemonSet's 128 MiB limit, and the old config must keep serving.
// The figures are printed (docs/benchmarks.md).
// SIGHUP is the only trigger: --config names a link to the file in another directory, out of
// the config watch's sight (node/config_source.h), and the poll is an hour away.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/config/input_files.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"

namespace gpushare {
namespace {

using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kWait = 20s;

// VmRSS or VmHWM of a process, in KiB (-1 when unreadable).
long StatusKib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string OverlappingEntries(int n) {
  std::string s = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n";
  for (int i = 0; i < n; ++i) s += "    - name: nvidia.com/gpu\n      replicas: 2\n";
  return s;
}

class NodeHostileConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    kubelet_ = std::make_unique<FakeKubelet>(fakes::FakeKubeletOptions{plugin_dir_});
    ASSERT_TRUE(kubelet_->Start().ok());
    std::filesystem::create_directories(dir_.Sub("edits"));
    config_ = dir_.Sub("edits/c.yaml");
    std::filesystem::create_symlink(config_, dir_.Sub("c.yaml"));
    Write(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      "
        "replicas: 10\n");
    agent_ = std::make_unique<AgentProcess>(
        std::vector<std::string>{
            "--inventory", std::string(GPUSHARE_SOURCE_DIR) + "/examples/inventory/8x-a10.yaml",
            "--config", dir_.Sub("c.yaml"), "--config-poll-interval", "1h", "--device-plugin-dir",
            plugin_dir_},
        dir_.Sub("agent.log"), testing::BoundedChildEnv());
    ASSERT_TRUE(agent_->started());
    ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 80, kWait));
    baseline_kib_ = StatusKib(agent_->pid(), "VmHWM");
    ASSERT_GT(baseline_kib_, 0);
    bound_kib_ = testing::InputMemoryBoundKib(baseline_kib_);
  }
  void TearDown() override { testing::StopAgent(agent_.get(), HasFailure(), 20000); }

  void Write(const std::string& text) {
    std::filesystem::remove_all(config_);
    std::ofstream(config_, std::ios::binary) << text;
  }

  // Sends SIGHUP and waits until the agent has refused the reload; returns the new log.
  std::string ReloadRefused(const std::string& what) {
    const std::string before = agent_->Log();
    const size_t kept = Count(before, "event=reload_kept_old_config");
    agent_->Signal(SIGHUP);
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (Count(agent_->Log(), "event=reload_kept_old_config") == kept &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    const std::string log = agent_->Log();
    EXPECT_GT(Count(log, "event=reload_kept_old_config"), kept)
        << what << ": the reload was not refused";
    const long rss = StatusKib(agent_->pid(), "VmRSS"), hwm = StatusKib(agent_->pid(), "VmHWM");
    std::cout << "after SIGHUP with " << what << ": VmRSS " << rss << " KiB, VmHWM " << hwm
              << " KiB, " << Count(log.substr(before.size()), "event=reload_rejected")
              << " problem lines logged\n";
    EXPECT_GT(hwm, 0);
    EXPECT_LT(hwm, bound_kib_) << what << ": serving peak " << baseline_kib_ << " KiB";
    if (!testing::kAsanBuild) {
      EXPECT_LT(hwm, testing::kDaemonSetLimitKib) << what;
    }
    return log.substr(before.size());
  }

  void ExpectOldConfigServes() {
    auto r = kubelet_->Resource("nvidia.com/gpu");
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->connected);
    EXPECT_EQ(r->allocatable, 80);
    EXPECT_EQ(r->registrations, 1);
    EXPECT_TRUE(agent_->Running());
  }

  TempDir dir_;
  long baseline_kib_ = 0, bound_kib_ = 0;
  std::string plugin_dir_, config_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(NodeHostileConfigTest, ReloadsWithHostileConfigsStayBoundedAndKeepServing) {
  std::cout << "serving: VmRSS " << StatusKib(agent_->pid(), "VmRSS") << " KiB, VmHWM "
            << StatusKib(agent_->pid(), "VmHWM") << " KiB; bound " << bound_kib_ << " KiB\n";

  Write(OverlappingEntries(1000));
  std::string log = ReloadRefused("1000 overlapping entries (45 KB)");
  EXPECT_EQ(Count(log, "event=reload_rejected"), 21u) << "20 problems and a count of the rest";
  EXPECT_NE(log.find("979 more problems (999 in all)"), std::string::npos);
  ExpectOldConfigServes();

  Write(OverlappingEntries(270000));  // 12 MB
  log = ReloadRefused("a 12 MB file");
  EXPECT_NE(log.find("more than the limit of 1048576 bytes (1 MiB)"), std::string::npos) << log;
  ExpectOldConfigServes();

  Write(OverlappingEntries(3990));  // 19,955 YAML values: the largest document accepted
  log = ReloadRefused("3990 overlapping entries (180 KB, just under the value limit)");
  EXPECT_NE(log.find("3969 more problems (3989 in all)"), std::string::npos);
  ExpectOldConfigServes();

  std::string values =
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      "
      "devices: [0";
  while (values.size() < (1u << 20) - 8) values += ",0";
  Write(values + "]\n");
  log = ReloadRefused("1 MiB of one-digit list items");
  EXPECT_NE(log.find("YAML values"), std::string::npos) << log;
  ExpectOldConfigServes();

  std::filesystem::remove(config_);
  std::filesystem::create_directory(config_);
  log = ReloadRefused("a directory");
  EXPECT_NE(log.find("it is a directory"), std::string::npos) << log;
  ExpectOldConfigServes();

  std::filesystem::remove(config_);
  ASSERT_EQ(::mkfifo(config_.c_str(), 0600), 0);
  log = ReloadRefused("a FIFO");
  EXPECT_NE(log.find("it is a FIFO"), std::string::npos) << log;
  ExpectOldConfigServes();

  // Still listening to signals: a good config is taken.
  Write(
      "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      "
      "replicas: 5\n");
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 40, kWait, 2));
}

}  // namespace
}  // namespace gpushare
