// The NVML backend against the fake libnvidia-ml.so.1 (tests/fakes/native/nvml), loaded with
// dlopen by path exactly as gpushare-node --nvml-library does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpu/health_events.h"
#include "gpu/nvml_inventory.h"
#include "gpu/nvml_library.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kFake = std::string(GPUSHARE_BIN_DIR) + "/../fakes/nvml/libnvidia-ml.so.1";
const std::string kA10 = "GPU-0a100000-0000-4000-8000-000000000000";
const std::string kH100 = "GPU-0b100000-0000-4000-8000-000000000001";
std::string MigU(int j) {
  return "MIG-0c100000-0000-4000-8000-00000000000" + std::to_string(j);
}

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("gpushare_nvml_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "sys" / "0000:17:00.0");
    fs::create_directories(dir_ / "sys" / "0000:b1:00.0");
    std::ofstream(dir_ / "sys" / "0000:17:00.0" / "numa_node") << "0\n";
    std::ofstream(dir_ / "sys" / "0000:b1:00.0" / "numa_node") << "1\n";
    events_ = (dir_ / "events").string();
    WriteConfig("");
    ::setenv("FAKE_NVML_CONFIG", (dir_ / "fake.conf").c_str(), 1);
    opts_.library_path = kFake;
    opts_.sysfs_pci_root = (dir_ / "sys").string();
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_CONFIG");
    fs::remove_all(dir_);
  }
  void WriteConfig(const std::string& extra) {
    std::ofstream f(dir_ / "fake.conf");
    f << "driver 570.124.06\ncuda 12080\nevents " << events_ << "\n"
      << "gpu uuid=" << kA10 << " name=\"NVIDIA A10\" memory_mib=23028 reserved_mib=400 cc=8.6 "
      << "pci=00000000:17:00.0 sms=72\n"
      << "gpu uuid=" << kH100 << " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 cc=9.0 "
      << "pci=00000000:B1:00.0 sms=132 mig=1\n";
    for (int j = 0; j < 3; ++j) {
      f << "mig gpu=1 uuid=" << MigU(j) << " gi=" << 7 + j
        << " ci=0 memory_mib=9856 slices=1 sms=16" << (j == 2 ? " slot=4" : "") << "\n";
    }
    f << "mig gpu=1 uuid=" << MigU(5) << " gi=3 ci=0 memory_mib=19968 slices=2 sms=32 "
      << "name=\"NVIDIA H100 80GB HBM3 MIG 2g.20gb+me\"\n";
    f << extra;
  }
  void AppendEvent(const std::string& line) {
    std::ofstream(events_, std::ios::app) << line << "\n";
  }

  fs::path dir_;
  std::string events_;
  NvmlInventoryOptions opts_;
};

TEST_F(NvmlTest, ReadsTheInventory) {
  NvmlInventorySource src(opts_);
  auto inv = src.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->source, "nvml");
  EXPECT_EQ(inv->driver_version, "570.124.06");
  EXPECT_EQ(inv->cuda_driver_version, "12.8");
  ASSERT_EQ(inv->gpus.size(), 2u);
  const Gpu& a = inv->gpus[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.uuid, kA10);
  EXPECT_EQ(a.product, "NVIDIA A10");
  EXPECT_EQ(a.memory_mib, 23028u) << "v2 total includes the driver's reservation";
  EXPECT_EQ(a.cc_major, 8);
  EXPECT_EQ(a.cc_minor, 6);
  EXPECT_EQ(a.pci_bus_id, "0000:17:00.0");
  EXPECT_EQ(a.numa_node, 0);
  EXPECT_EQ(a.multiprocessors, 72);
  EXPECT_FALSE(a.mig_enabled);
  const Gpu& h = inv->gpus[1];
  EXPECT_EQ(h.pci_bus_id, "0000:b1:00.0");
  EXPECT_EQ(h.numa_node, 1);
  ASSERT_TRUE(h.mig_enabled);
  ASSERT_EQ(h.mig.size(), 4u);
  EXPECT_EQ(h.mig[0].index, 0);
  EXPECT_EQ(h.mig[0].uuid, MigU(0));
  EXPECT_EQ(h.mig[0].profile, "1g.10gb");
  EXPECT_EQ(h.mig[0].gpu_instance_id, 7);
  EXPECT_EQ(h.mig[0].memory_mib, 9856u);
  EXPECT_EQ(h.mig[0].multiprocessors, 16);
  EXPECT_EQ(h.mig[2].index, 2) << "slot 2 holds the 2g.20gb+me; slot 3 is empty";
  EXPECT_EQ(h.mig[2].profile, "2g.20gb+me") << "the name's spelling keeps +me";
  EXPECT_EQ(h.mig[3].index, 4) << "empty slots are skipped, indices kept";
  EXPECT_EQ(h.mig[3].uuid, MigU(2));
  EXPECT_NE(src.library(), nullptr);
}

TEST_F(NvmlTest, NoNumaNodeFile) {
  opts_.sysfs_pci_root = (dir_ / "nothing").string();
  auto inv = NvmlInventorySource(opts_).Load();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->gpus[0].numa_node, -1);
}

TEST_F(NvmlTest, MissingLibraryIsAClearError) {
  opts_.library_path = (dir_ / "libnvidia-ml.so.1").string();
  auto inv = NvmlInventorySource(opts_).Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("could not be loaded"));
  EXPECT_THAT(inv.status().message(), HasSubstr("--inventory FILE"));
}

TEST_F(NvmlTest, DriverNotLoaded) {
  ::unsetenv("FAKE_NVML_CONFIG");
  auto inv = NvmlInventorySource(opts_).Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_THAT(inv.status().message(), HasSubstr("nvmlInit_v2: Driver Not Loaded (9)"));
  EXPECT_THAT(inv.status().message(), HasSubstr("kernel driver is not loaded"));
}

TEST_F(NvmlTest, NoGpus) {
  std::ofstream(dir_ / "fake.conf") << "driver 570.124.06\n";
  auto inv = NvmlInventorySource(opts_).Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(inv.status().message(), HasSubstr("reports no GPUs"));
}

TEST_F(NvmlTest, AFailingCallIsReported) {
  WriteConfig("fail nvmlDeviceGetUUID 15\n");
  auto inv = NvmlInventorySource(opts_).Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_THAT(inv.status().message(), HasSubstr("GPU 0: nvmlDeviceGetUUID: GPU is lost (15)"));
}

TEST_F(NvmlTest, FakeKeepsUpstreamSemantics) {
  auto lib = NvmlLibrary::Open(kFake);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto& n = **lib;
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(n.DeviceGetHandleByIndex(0, &dev), NVML_SUCCESS);
  char small[8];
  EXPECT_EQ(n.DeviceGetUUID(dev, small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
  nvmlMemory_v2_t m2 = {};
  m2.version = 1;
  EXPECT_EQ(n.DeviceGetMemoryInfoV2(dev, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(n.DeviceGetMemoryInfoV2(dev, &m2), NVML_SUCCESS);
  nvmlMemory_t m1 = {};
  ASSERT_EQ(n.DeviceGetMemoryInfo(dev, &m1), NVML_SUCCESS);
  EXPECT_EQ(m1.total, m2.total);
  EXPECT_EQ(m2.reserved, 400ull << 20);
  EXPECT_EQ(m1.used, m2.used + m2.reserved) << "v1 counts the reservation as used";
  unsigned gi = 0;
  EXPECT_EQ(n.DeviceGetGpuInstanceId(dev, &gi), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(n.DeviceGetHandleByIndex(2, &dev), NVML_ERROR_INVALID_ARGUMENT);
  // Reference counting: a second init needs a second shutdown.
  ASSERT_EQ(n.Init(), NVML_SUCCESS);
  ASSERT_EQ(n.Shutdown(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(n.DeviceGetCount(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(n.Shutdown(), NVML_SUCCESS);
  EXPECT_EQ(n.DeviceGetCount(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(n.Shutdown(), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(n.Init(), NVML_SUCCESS);  // balanced again for the destructor
}

TEST_F(NvmlTest, MigProfileFromAttributes) {
  // H100 80GB: 81559 MiB in all.
  const unsigned long long h100 = 81559ull << 20;
  EXPECT_EQ(MigProfileFromAttributes(1, 1, 9856, h100), "1g.10gb");
  EXPECT_EQ(MigProfileFromAttributes(2, 2, 19968, h100), "2g.20gb");
  EXPECT_EQ(MigProfileFromAttributes(3, 3, 40192, h100), "3g.40gb");
  EXPECT_EQ(MigProfileFromAttributes(7, 7, 80896, h100), "7g.80gb");
  EXPECT_EQ(MigProfileFromAttributes(2, 1, 19968, h100), "1c.2g.20gb");
  // A100 40GB: 40960 MiB; 1g.5gb has 4864 MiB.
  EXPECT_EQ(MigProfileFromAttributes(1, 1, 4864, 40960ull << 20), "1g.5gb");
  EXPECT_EQ(SysfsPciBusId("00000000:B1:00.0"), "0000:b1:00.0");
  EXPECT_EQ(SysfsPciBusId("0000:17:00.0"), "0000:17:00.0");
}

TEST_F(NvmlTest, XidEventsOnGpusAndMigDevices) {
  NvmlInventorySource src(opts_);
  auto inv = src.Load();
  ASSERT_TRUE(inv.ok());
  auto clock = std::make_shared<SimulatedClock>(1000);
  auto source = MakeNvmlHealthEventSource(src.library(), *inv, clock);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto poll = (*source)->Wait(std::chrono::milliseconds(0));
  ASSERT_TRUE(poll.ok());
  EXPECT_TRUE(poll->events.empty()) << "timeout with nothing injected";

  AppendEvent("xid=79 uuid=" + kA10);
  AppendEvent("xid=94 uuid=" + MigU(1));
  AppendEvent("xid=48 gpu=1 gi=3 ci=0");
  std::vector<HealthEvent> got;
  for (int i = 0; i < 50 && got.size() < 3; ++i) {
    auto p = (*source)->Wait(std::chrono::milliseconds(100));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    got.insert(got.end(), p->events.begin(), p->events.end());
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].uuid, kA10);
  EXPECT_EQ(got[0].xid, 79u);
  EXPECT_EQ(got[0].kind, HealthEventKind::kXid);
  EXPECT_EQ(got[0].time_ms, 1000);
  EXPECT_EQ(got[1].uuid, MigU(1)) << "GI/CI of the event map to the MIG device";
  EXPECT_EQ(got[1].xid, 94u);
  EXPECT_EQ(got[2].uuid, MigU(5));

  AppendEvent("lost");
  std::vector<HealthEvent> lost;
  for (int i = 0; i < 50 && lost.empty(); ++i) {
    auto p = (*source)->Wait(std::chrono::milliseconds(100));
    ASSERT_TRUE(p.ok());
    lost = p->events;
  }
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].kind, HealthEventKind::kDeviceLost);
  EXPECT_EQ(lost[0].uuid, "");
  EXPECT_THAT(lost[0].detail, HasSubstr("GPU is lost"));
}

TEST_F(NvmlTest, NoGpuSupportsEvents) {
  std::ofstream(dir_ / "fake.conf") << "gpu uuid=" << kA10 << " events=0\n";
  NvmlInventorySource src(opts_);
  auto inv = src.Load();
  ASSERT_TRUE(inv.ok());
  auto source = MakeNvmlHealthEventSource(src.library(), *inv);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(source.status().message(), HasSubstr("no GPU supports XID events"));
}

}  // namespace
}  // namespace gpushare
