// The node side of the in-container library's contract: core/interposer_contract (pure) and
// node/interposer_mounts (files and the Allocate decorator). The config file it writes is read
// back with the library's own parser, so both sides agree on the format.
#include "core/interposer_contract.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "interpose/base.h"
#include "interpose/config.h"
#include "node/interposer_mounts.h"
#include "tests/interpose/probe.h"

namespace gpushare {
namespace {

PlannedDevice Replica(const std::string& uuid, int n, uint64_t limit_mib) {
  PlannedDevice d;
  d.device_uuid = uuid;
  d.gpu_uuid = uuid;
  d.id = uuid + "::" + std::to_string(n);
  d.replica = n;
  d.memory_limit_mib = limit_mib;
  return d;
}

const char* const kA = "GPU-11111111-2222-3333-4444-555555555555";
const char* const kB = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

TEST(InterposerContract, ReplicasOfOneGpuAddUpAndUnlimitedStaysUnlimited) {
  PlannedDevice a0 = Replica(kA, 0, 2048), a1 = Replica(kA, 1, 2048), b = Replica(kB, 0, 0);
  auto devs = InterposerDevicesFor({&a0, &a1, &b});
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].uuid, kA);
  EXPECT_EQ(devs[0].memory_limit_mib, 4096u);
  EXPECT_EQ(devs[1].memory_limit_mib, 0u);
  PlannedDevice mixed = Replica(kA, 2, 0);
  EXPECT_EQ(InterposerDevicesFor({&a0, &mixed})[0].memory_limit_mib, 0u) << "one unlimited device: unlimited";
}

TEST(InterposerContract, ComputeSharesAddUpToWholePercents) {
  PlannedDevice a0 = Replica(kA, 0, 0), a1 = Replica(kA, 1, 0), a2 = Replica(kA, 2, 0), b = Replica(kB, 0, 0);
  a0.sm_share_ppm = a1.sm_share_ppm = a2.sm_share_ppm = 1'000'000 / 3;  // evenSplit, 3 replicas
  auto devs = InterposerDevicesFor({&a0, &b});
  EXPECT_EQ(devs[0].sm_limit_percent, 33u);
  EXPECT_EQ(devs[1].sm_limit_percent, 0u) << "no share: no SM limit";
  EXPECT_EQ(InterposerDevicesFor({&a0, &a1})[0].sm_limit_percent, 66u);
  EXPECT_EQ(InterposerDevicesFor({&a0, &a1, &a2})[0].sm_limit_percent, 0u) << "all of it is no limit";
  PlannedDevice tiny = Replica(kA, 3, 0);
  tiny.sm_share_ppm = 1'000'000 / 1024;  // one MiB unit of a 1 GiB GPU
  EXPECT_EQ(InterposerDevicesFor({&tiny})[0].sm_limit_percent, 1u) << "never rounded down to none";
  PlannedDevice unshared = Replica(kA, 4, 0);
  EXPECT_EQ(InterposerDevicesFor({&a0, &unshared})[0].sm_limit_percent, 0u) << "one unlimited device: unlimited";
  // Through the contract: the HAMi-compatible variable.
  Result<InterposerSetup> s = BuildInterposerSetup(InterposerDevicesFor({&a0}), {"/opt/gpushare", "/var/lib/c-2", 320});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->envs.at("CUDA_DEVICE_SM_LIMIT_0"), "33");
}

TEST(InterposerContract, EnvironmentMountsAndConfigRoundTripThroughTheLibrary) {
  std::vector<InterposerDevice> devs = {{kA, 4096, 0}, {kB, 1024, 30}};
  InterposerOptions o{"/opt/gpushare", "/var/lib/gpushare/containers/c-1", 320};
  Result<InterposerSetup> s = BuildInterposerSetup(devs, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4096m");
  EXPECT_EQ(s->envs.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "1024m");
  EXPECT_EQ(s->envs.at("CUDA_DEVICE_SM_LIMIT_1"), "30");
  EXPECT_EQ(s->envs.count("CUDA_DEVICE_SM_LIMIT_0"), 0u);
  EXPECT_EQ(s->envs.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"), kContainerRegionPath);
  EXPECT_EQ(s->preload_text, std::string(kContainerLibraryPath) + "\n");
  std::vector<InterposerMount> want = {
      {kContainerLibraryPath, "/opt/gpushare/libgpushare-cuda.so", true},
      {kContainerSharedDir, "/var/lib/gpushare/containers/c-1/shared", false},
      {kContainerConfigPath, "/var/lib/gpushare/containers/c-1/config", true},
      {kContainerPreloadPath, "/var/lib/gpushare/containers/c-1/ld.so.preload", true}};
  EXPECT_EQ(s->mounts, want);
  EXPECT_STREQ(kContainerConfigPath, interpose::kConfigPath) << "the path the library reads";

  interpose::Config c;
  interpose::ParseConfigText(s->config_text.data(), s->config_text.size(), &c);
  EXPECT_FALSE(c.fail_closed) << c.problem;
  EXPECT_EQ(c.problem[0], '\0') << c.problem;
  EXPECT_STREQ(c.region_path, kContainerRegionPath);
  EXPECT_EQ(c.context_overhead, 320ull << 20);
  uint8_t ua[16], ub[16];
  ASSERT_TRUE(interpose::ParseUuid(kA, 40, ua));
  ASSERT_TRUE(interpose::ParseUuid(kB, 40, ub));
  // Whatever index a process gives them, the UUIDs decide.
  EXPECT_EQ(interpose::LimitsFor(c, 7, ua).memory_limit, 4096ull << 20);
  EXPECT_EQ(interpose::LimitsFor(c, 0, ub).memory_limit, 1024ull << 20);
  EXPECT_EQ(interpose::LimitsFor(c, 0, ub).sm_limit, 30u);
  EXPECT_EQ(interpose::LimitsFor(c, 0, ua).sm_limit, 0u);
}

TEST(InterposerContract, NothingToEnforceGivesNothing) {
  Result<InterposerSetup> s = BuildInterposerSetup({{kA, 0, 0}, {kB, 0, 100}}, {"", ""});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->enforces_anything());
  EXPECT_TRUE(s->envs.empty());
  EXPECT_TRUE(s->mounts.empty());
}

TEST(InterposerContract, BadInputsAreNamed) {
  auto err = [](const std::vector<InterposerDevice>& d, const InterposerOptions& o) {
    Result<InterposerSetup> s = BuildInterposerSetup(d, o);
    return s.ok() ? std::string("ok") : s.status().message();
  };
  EXPECT_NE(err({{kA, 1, 0}}, {"relative", "/x"}).find("interposerHostDir"), std::string::npos);
  EXPECT_NE(err({{kA, 1, 0}}, {"/lib", ""}).find("container directory"), std::string::npos);
  EXPECT_NE(err({{kA, 0, 150}}, {"/lib", "/x"}).find("0..100"), std::string::npos);
  EXPECT_NE(err({{"", 1, 0}}, {"/lib", "/x"}).find("no UUID"), std::string::npos);
}

class InterposerMountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mkdir(dir_.File("lib").c_str(), 0755);
    dir_.Write("lib/libgpushare-cuda.so", "not really");
  }
  interpose::testing::ScratchDir dir_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(InterposerMountsTest, PreparesTheContainerDirectoryAndDecoratesAllocate) {
  node::InterposerMountOptions o{dir_.File("lib"), dir_.File("state/containers")};
  auto decorate = node::MakeInterposerDecorator(o);
  PlannedDevice a0 = Replica(kA, 0, 6144);
  deviceplugin::ResolvedRequest req;
  req.devices = {&a0};
  deviceplugin::ContainerAllocation alloc;
  alloc.envs["NVIDIA_VISIBLE_DEVICES"] = kA;
  ASSERT_TRUE(decorate(req, &alloc).ok());
  EXPECT_EQ(alloc.envs.at("NVIDIA_VISIBLE_DEVICES"), kA) << "the strategy's answer is kept";
  EXPECT_EQ(alloc.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "6144m");
  ASSERT_EQ(alloc.mounts.size(), 4u);
  std::string config_host, shared_host, preload_host;
  for (const auto& m : alloc.mounts) {
    if (m.container_path == kContainerConfigPath) config_host = m.host_path;
    if (m.container_path == kContainerSharedDir) shared_host = m.host_path;
    if (m.container_path == kContainerPreloadPath) preload_host = m.host_path;
  }
  interpose::Config c;
  std::string text = Slurp(config_host);
  interpose::ParseConfigText(text.data(), text.size(), &c);
  uint8_t ua[16];
  interpose::ParseUuid(kA, 40, ua);
  EXPECT_EQ(interpose::LimitsFor(c, 0, ua).memory_limit, 6144ull << 20);
  EXPECT_EQ(Slurp(preload_host), std::string(kContainerLibraryPath) + "\n");
  struct stat st;
  ASSERT_EQ(stat(shared_host.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u) << "every user of the container shares the region";
  ASSERT_EQ(stat(config_host.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // A second container gets its own directory.
  deviceplugin::ContainerAllocation other;
  ASSERT_TRUE(decorate(req, &other).ok());
  EXPECT_NE(other.mounts[2].host_path, alloc.mounts[2].host_path);
}

TEST_F(InterposerMountsTest, UnlimitedContainersGetNothingAndAMissingLibraryRefuses) {
  node::InterposerMountOptions o{dir_.File("lib"), dir_.File("state")};
  PlannedDevice free_dev = Replica(kA, 0, 0);
  deviceplugin::ResolvedRequest req;
  req.devices = {&free_dev};
  deviceplugin::ContainerAllocation alloc;
  ASSERT_TRUE(node::MakeInterposerDecorator(o)(req, &alloc).ok());
  EXPECT_TRUE(alloc.mounts.empty());
  EXPECT_TRUE(alloc.envs.empty());
  EXPECT_NE(access(dir_.File("state").c_str(), F_OK), 0) << "no directory for nothing";
  PlannedDevice limited = Replica(kA, 0, 100);
  req.devices = {&limited};
  node::InterposerMountOptions missing{dir_.File("nolib"), dir_.File("state")};
  Status s = node::MakeInterposerDecorator(missing)(req, &alloc);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("libgpushare-cuda.so"), std::string::npos) << s.message();
}

TEST(InterposerDecoratorFactory, OnlyWhenTheLibraryDirectoryIsConfigured) {
  node::AgentInputs in;
  EXPECT_FALSE(node::InterposerDecoratorFactory()(in));
  in.config.gpushare.interposer_host_dir = "/opt/gpushare";
  EXPECT_TRUE(node::InterposerDecoratorFactory()(in));
}

}  // namespace
}  // namespace gpushare
