// The node side of the in-container library's contract: core/interposer_contract (pure),
// node/interposer_mounts (files and the Allocate decorator) and node/library_install (the library
// on the host at a versioned path). The config file it writes is read
// back with the library's own parser, so both sides agree on the format.
#include "core/interposer_contract.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "interpose/base.h"
#include "interpose/config.h"
#include "node/interposer_mounts.h"
#include "node/library_install.h"
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
  EXPECT_EQ(InterposerDevicesFor({&a0, &mixed})[0].memory_limit_mib, 0u)
      << "one unlimited device: unlimited";
}

TEST(InterposerContract, ComputeSharesAddUpToWholePercents) {
  PlannedDevice a0 = Replica(kA, 0, 0), a1 = Replica(kA, 1, 0), a2 = Replica(kA, 2, 0),
                b = Replica(kB, 0, 0);
  a0.sm_share_ppm = a1.sm_share_ppm = a2.sm_share_ppm = 1'000'000 / 3;  // evenSplit, 3 replicas
  auto devs = InterposerDevicesFor({&a0, &b});
  EXPECT_EQ(devs[0].sm_limit_percent, 33u);
  EXPECT_EQ(devs[1].sm_limit_percent, 0u) << "no share: no SM limit";
  EXPECT_EQ(InterposerDevicesFor({&a0, &a1})[0].sm_limit_percent, 66u);
  EXPECT_EQ(InterposerDevicesFor({&a0, &a1, &a2})[0].sm_limit_percent, 0u)
      << "all of it is no limit";
  PlannedDevice tiny = Replica(kA, 3, 0);
  tiny.sm_share_ppm = 1'000'000 / 1024;  // one MiB unit of a 1 GiB GPU
  EXPECT_EQ(InterposerDevicesFor({&tiny})[0].sm_limit_percent, 1u) << "never rounded down to none";
  PlannedDevice unshared = Replica(kA, 4, 0);
  EXPECT_EQ(InterposerDevicesFor({&a0, &unshared})[0].sm_limit_percent, 0u)
      << "one unlimited device: unlimited";
  // Through the contract: the HAMi-compatible variable.
  Result<InterposerSetup> s =
      BuildInterposerSetup(InterposerDevicesFor({&a0}), {"/opt/gpushare", "/var/lib/c-2", 320});
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

// ---- node/library_install: the library on the host at a versioned, never rewritten path.

struct FileId {
  ino_t ino = 0;
  timespec mtime{};
};
FileId IdOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return {st.st_ino, st.st_mtim};
}
bool Same(const FileId& a, const FileId& b) {
  return a.ino == b.ino && a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}

class LibraryInstallTest : public ::testing::Test {
 protected:
  std::string Host() const { return dir_.File("host/lib"); }
  interpose::testing::ScratchDir dir_;
};

TEST_F(LibraryInstallTest, InstallsAtAVersionedPathOnceAndNeverRewritesIt) {
  dir_.Write("v1.so", "library one");
  Result<node::InstalledLibrary> a = node::InstallLibrary(dir_.File("v1.so"), Host(), "0.1.0");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->written);
  EXPECT_EQ(a->dir.rfind(Host() + "/0.1.0-", 0), 0u) << a->dir;
  EXPECT_EQ(a->dir.size(), Host().size() + std::string("/0.1.0-").size() + 16)
      << "version, then a 64-bit hash";
  EXPECT_EQ(a->path, a->dir + "/libgpushare-cuda.so");
  EXPECT_EQ(Slurp(a->path), "library one");
  struct stat st {};
  ASSERT_EQ(stat(a->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  const FileId first = IdOf(a->path);

  // Again (an agent restart): found, nothing written.
  Result<node::InstalledLibrary> again = node::InstallLibrary(dir_.File("v1.so"), Host(), "0.1.0");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->written);
  EXPECT_EQ(again->dir, a->dir);
  EXPECT_TRUE(Same(IdOf(a->path), first)) << "the installed file was written again";

  // An upgrade (other bytes, same or new version): a new directory beside; the old file, which
  // running containers have mapped, is untouched.
  dir_.Write("v2.so", "library two");
  for (const char* version : {"0.1.0", "0.2.0"}) {
    Result<node::InstalledLibrary> b = node::InstallLibrary(dir_.File("v2.so"), Host(), version);
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_TRUE(b->written);
    EXPECT_NE(b->dir, a->dir);
    EXPECT_EQ(Slurp(b->path), "library two");
  }
  EXPECT_EQ(Slurp(a->path), "library one");
  EXPECT_TRUE(Same(IdOf(a->path), first));
  // No temporary directory stays behind.
  int entries = 0;
  for (DIR* d = opendir(Host().c_str()); d != nullptr;) {
    dirent* e = readdir(d);
    if (!e) {
      closedir(d);
      break;
    }
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    ++entries;
    EXPECT_NE(name[0], '.') << "left behind: " << name;
  }
  EXPECT_EQ(entries, 3);
}

TEST_F(LibraryInstallTest, ADirectoryOfThatNameWithOtherBytesIsRefusedNotOverwritten) {
  dir_.Write("v1.so", "library one");
  Result<node::InstalledLibrary> a =
      node::InstallLibrary(dir_.File("v1.so"), dir_.File("probe"), "0.1.0");
  ASSERT_TRUE(a.ok());
  const std::string name = a->dir.substr(a->dir.rfind('/') + 1);
  // The same name under Host(), holding something else.
  ASSERT_EQ(system(("mkdir -p '" + Host() + "/" + name + "'").c_str()), 0);
  dir_.Write("host/lib/" + name + "/libgpushare-cuda.so", "tampered");
  Result<node::InstalledLibrary> b = node::InstallLibrary(dir_.File("v1.so"), Host(), "0.1.0");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("exists with other content"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find(name), std::string::npos) << b.status().message();
  EXPECT_EQ(Slurp(Host() + "/" + name + "/libgpushare-cuda.so"), "tampered");
}

TEST_F(LibraryInstallTest, BadInputsAreNamed) {
  dir_.Write("v1.so", "library one");
  dir_.Write("empty.so", "");
  auto err = [&](const std::string& source, const std::string& host, const std::string& version) {
    Result<node::InstalledLibrary> r = node::InstallLibrary(source, host, version);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(err(dir_.File("v1.so"), "relative/dir", "0.1.0").find("must be an absolute path"),
            std::string::npos);
  EXPECT_NE(err(dir_.File("missing.so"), Host(), "0.1.0").find(dir_.File("missing.so")),
            std::string::npos);
  EXPECT_NE(err(dir_.File("empty.so"), Host(), "0.1.0").find("is empty"), std::string::npos);
  EXPECT_NE(err(dir_.File("v1.so"), Host(), "../x").find("library version"), std::string::npos);
  EXPECT_NE(err(dir_.File("v1.so"), Host(), "").find("library version"), std::string::npos);
  // Larger than the bound: refused without reading it all into memory first.
  const std::string big = dir_.File("big.so");
  ASSERT_EQ(truncate((dir_.Write("big.so", "x"), big).c_str(),
                     static_cast<off_t>(node::kMaxLibraryBytes) + 1),
            0);
  EXPECT_NE(err(big, Host(), "0.1.0").find("larger than 64 MiB"), std::string::npos);
  // A file where the host directory should be.
  dir_.Write("notadir", "x");
  EXPECT_NE(err(dir_.File("v1.so"), dir_.File("notadir"), "0.1.0"), "ok");
}

TEST_F(LibraryInstallTest, TemporariesOfADeadInstallAreRemovedOnlyWhenStale) {
  ASSERT_EQ(
      system(("mkdir -p '" + Host() + "/.install-1-0' '" + Host() + "/.install-2-0'").c_str()), 0);
  dir_.Write("host/lib/.install-1-0/libgpushare-cuda.so", "half");
  timeval old[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimes((Host() + "/.install-1-0").c_str(), old), 0);
  dir_.Write("v1.so", "library one");
  ASSERT_TRUE(node::InstallLibrary(dir_.File("v1.so"), Host(), "0.1.0").ok());
  EXPECT_NE(access((Host() + "/.install-1-0").c_str(), F_OK), 0) << "an hour-old temporary stays";
  EXPECT_EQ(access((Host() + "/.install-2-0").c_str(), F_OK), 0)
      << "a fresh one (an install in progress) was removed";
}

TEST_F(LibraryInstallTest, TheDecoratorMountsTheInstalledFile) {
  dir_.Write("v1.so", "library one");
  node::AgentInputs in;
  in.config.gpushare.interposer_host_dir = Host();
  in.config.gpushare.container_state_dir = dir_.File("state");
  auto decorate = node::InterposerDecoratorFactory(dir_.File("v1.so"), "0.1.0")(in);
  ASSERT_TRUE(decorate);
  PlannedDevice limited = Replica(kA, 0, 100);
  deviceplugin::ResolvedRequest req;
  req.devices = {&limited};
  deviceplugin::ContainerAllocation alloc;
  ASSERT_TRUE(decorate(req, &alloc).ok());
  std::string library_host;
  for (const auto& m : alloc.mounts)
    if (m.container_path == kContainerLibraryPath) library_host = m.host_path;
  EXPECT_EQ(library_host.rfind(Host() + "/0.1.0-", 0), 0u) << library_host;
  EXPECT_EQ(Slurp(library_host), "library one") << "Allocate names a host file that exists";

  // Installing fails (the source is gone): containers that need limits are refused with the
  // reason, the others still start.
  node::AgentInputs other = in;
  other.config.gpushare.interposer_host_dir = dir_.File("host/other");
  auto refuse = node::InterposerDecoratorFactory(dir_.File("gone.so"), "0.1.0")(other);
  ASSERT_TRUE(refuse);
  deviceplugin::ContainerAllocation none;
  Status s = refuse(req, &none);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("installing the in-container library"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("gone.so"), std::string::npos) << s.message();
  PlannedDevice free_dev = Replica(kA, 1, 0);
  req.devices = {&free_dev};
  EXPECT_TRUE(refuse(req, &none).ok());
  EXPECT_TRUE(none.mounts.empty());
}
}  // namespace
}  // namespace gpushare
