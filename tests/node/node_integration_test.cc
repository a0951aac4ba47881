// Integration: the real gpushare-node binary against the kubelet double, in a temporary
// device plugin directory: what it serves and allocates, signals, health events, reloads.
// Every wait is a liveness bound on an event (a registration, a log line, an exit); nothing
// waits for a timer of the agent. The lifecycle's timing (re-registration after a kubelet
// restart or a dropped stream, backoff, health recovery) is tested in-process on a simulated
// clock (node_agent_test); the real binary's re-registration promise in
// node_kubelet_restart_test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"

namespace gpushare {
namespace {

using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kWait = 15s;

std::string Example(const std::string& rel) {
  return std::string(GPUSHARE_SOURCE_DIR) + "/examples/" + rel;
}

bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string BaseId(const std::string& id) {
  return id.substr(0, id.find("::"));
}

class NodeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    kubelet_ = std::make_unique<FakeKubelet>(fakes::FakeKubeletOptions{plugin_dir_});
    ASSERT_TRUE(kubelet_->Start().ok());
  }
  void TearDown() override { testing::StopAgent(agent_.get(), HasFailure()); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string p = dir_.Sub(name);
    std::ofstream(p) << text;
    return p;
  }

  // A config that only SIGHUP reloads (the tests of SIGHUP): --config names a link to a file in
  // another directory, out of the config watch's sight (node/config_source.h), and the agent is
  // started with the poll an hour away (kSighupOnly). Returns the link; writes the file.
  std::string SighupConfig(const std::string& text) {
    std::filesystem::create_directories(dir_.Sub("edits"));
    std::ofstream(dir_.Sub("edits/c.yaml")) << text;
    const std::string link = dir_.Sub("sighup.yaml");
    if (!std::filesystem::is_symlink(link))
      std::filesystem::create_symlink(dir_.Sub("edits/c.yaml"), link);
    return link;
  }
  const std::vector<std::string> kSighupOnly = {"--config-poll-interval", "1h"};

  // Starts the agent; `extra` args follow the common ones.
  void StartAgent(const std::string& inventory, const std::string& config,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--inventory",         inventory,   "--config",    config,
                                     "--device-plugin-dir", plugin_dir_, "--log-level", "debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args, dir_.Sub("agent.log"));
    ASSERT_TRUE(agent_->started());
  }

  // Waits for every named resource to be connected with its count of healthy devices.
  void ExpectCounts(const std::map<std::string, int>& want, int min_registrations = 0) {
    for (const auto& [name, n] : want) {
      EXPECT_TRUE(kubelet_->WaitForAllocatable(name, n, kWait, min_registrations))
          << name << " want " << n << " got "
          << (kubelet_->Resource(name) ? std::to_string(kubelet_->Resource(name)->allocatable)
                                       : "none");
    }
  }

  TempDir dir_;
  std::string plugin_dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<AgentProcess> agent_;
};

// ---- example inventories -------------------------------------------------------------------

struct ExampleCase {
  const char* name;
  std::map<std::string, int> counts;
};

class ExampleInventoryTest : public NodeIntegrationTest,
                             public ::testing::WithParamInterface<ExampleCase> {};

TEST_P(ExampleInventoryTest, AllResourcesRegisterWithTheRightCounts) {
  const ExampleCase& c = GetParam();
  StartAgent(Example(std::string("inventory/") + c.name + ".yaml"),
             Example(std::string("config/") + c.name + ".yaml"));
  ExpectCounts(c.counts);
  std::set<std::string> registered;
  for (const auto& r : kubelet_->Resources()) {
    if (r.connected) registered.insert(r.name);
    EXPECT_TRUE(r.options.get_preferred_allocation_available()) << r.name;
    EXPECT_EQ(r.capacity, r.allocatable) << r.name;
  }
  std::set<std::string> want;
  for (const auto& [n, count] : c.counts) want.insert(n);
  EXPECT_EQ(registered, want) << "exactly the planned resources register";
  for (const auto& ev : kubelet_->RegistrationLog())
    EXPECT_TRUE(ev.accepted) << ev.resource_name << ": " << ev.error;
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleInventoryTest,
                         ::testing::Values(ExampleCase{"8x-a10", {{"nvidia.com/gpu", 80}}},
                                           ExampleCase{"h100-80gb-mig-1g.10gb",
                                                       {{"nvidia.com/mig-1g.10gb", 21}}},
                                           ExampleCase{"mixed",
                                                       {{"nvidia.com/gpu", 1},
                                                        {"nvidia.com/gpu.shared", 20},
                                                        {"nvidia.com/mig-3g.40gb", 3},
                                                        {"nvidia.com/mig-2g.20gb", 6}}}),
                         [](const ::testing::TestParamInfo<ExampleCase>& i) {
                           std::string n = i.param.name;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// ---- Allocate per strategy ---------------------------------------------------------------

std::string A10Config(const std::string& plugin_flags, int replicas = 10) {
  return "version: v1\nflags:\n  migStrategy: none\n  plugin:\n" + plugin_flags +
         "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " +
         std::to_string(replicas) + "\n";
}

TEST_F(NodeIntegrationTest, AllocateEnvvarUuidCollapsesReplicas) {
  StartAgent(Example("inventory/8x-a10.yaml"),
             WriteFile("c.yaml", A10Config("    deviceListStrategy: envvar\n")));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_TRUE(a.preferred_called);
  EXPECT_EQ(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"), BaseId(a.device_ids[0]));
  // Two replicas of the same GPU, straight to Allocate: one UUID.
  const std::string gpu = BaseId(a.device_ids[0]);
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(gpu + "::8");
  req.mutable_container_requests(0)->add_devices_ids(gpu + "::9");
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(kubelet_->RawAllocate("nvidia.com/gpu", req, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), gpu);
  EXPECT_EQ(resp.container_responses(0).devices_size(), 0);
  EXPECT_EQ(resp.container_responses(0).cdi_devices_size(), 0);
}

TEST_F(NodeIntegrationTest, AllocateDistributedSpreadsContainersOverGpus) {
  StartAgent(Example("inventory/8x-a10.yaml"), Example("config/8x-a10.yaml"));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  std::set<std::string> gpus;
  for (int i = 0; i < 8; ++i) {
    auto a = kubelet_->Admit("p" + std::to_string(i) + "/c", "nvidia.com/gpu", 1);
    ASSERT_TRUE(a.admitted) << a.error;
    gpus.insert(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"));
  }
  EXPECT_EQ(gpus.size(), 8u);
}

TEST_F(NodeIntegrationTest, AllocateIndexStrategy) {
  StartAgent(Example("inventory/8x-a10.yaml"),
             WriteFile("c.yaml", A10Config("    deviceIDStrategy: index\n")));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  std::string v = a.response.envs().at("NVIDIA_VISIBLE_DEVICES");
  ASSERT_EQ(v.size(), 1u) << v;
  EXPECT_TRUE(v[0] >= '0' && v[0] <= '7') << v;
}

TEST_F(NodeIntegrationTest, AllocateMigIndexStrategy) {
  StartAgent(
      Example("inventory/h100-80gb-mig-1g.10gb.yaml"),
      WriteFile(
          "c.yaml",
          "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n    deviceIDStrategy: index\n"
          "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-1g.10gb\n"
          "      replicas: 3\n"));
  ExpectCounts({{"nvidia.com/mig-1g.10gb", 21}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/mig-1g.10gb", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  std::string v = a.response.envs().at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(v.rfind("0:", 0), 0u) << v;
}

TEST_F(NodeIntegrationTest, MigDeviceSpecsCarryTheCapabilityNodesOrAreRefused) {
  std::string dev_root = dir_.Sub("root");
  std::filesystem::create_directories(dev_root + "/dev/nvidia-caps");
  std::filesystem::create_directories(dev_root + "/proc/driver/nvidia-caps");
  for (std::string n : {"nvidiactl", "nvidia-uvm", "nvidia0"})
    std::ofstream(dev_root + "/dev/" + n) << "";
  // The driver's minors for the first six instances (GI 7..12, CI 0); GI 13 is left out.
  std::string minors = "config 1\nmonitor 2\n";
  for (int gi = 7; gi <= 12; ++gi)
    minors += "gpu0/gi" + std::to_string(gi) + "/access " + std::to_string(100 + 2 * gi) +
              "\ngpu0/gi" + std::to_string(gi) + "/ci0/access " + std::to_string(101 + 2 * gi) +
              "\n";
  std::ofstream(dev_root + "/proc/driver/nvidia-caps/mig-minors") << minors;
  StartAgent(
      Example("inventory/h100-80gb-mig-1g.10gb.yaml"),
      WriteFile(
          "c.yaml",
          "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n    passDeviceSpecs: true\n"),
      {"--dev-root", dev_root});
  ExpectCounts({{"nvidia.com/mig-1g.10gb", 7}});
  // Whole MIG devices: six get their two capability nodes each; the seventh is refused every
  // time kubelet offers it (a failed Allocate leaves the device free, so it comes up again).
  int granted = 0, refused = 0;
  for (int i = 0; i < 12 && granted < 6; ++i) {
    auto a = kubelet_->Admit("p/c" + std::to_string(i), "nvidia.com/mig-1g.10gb", 1);
    if (!a.admitted) {
      ++refused;
      EXPECT_NE(a.error.find("gpu0/gi13/access"), std::string::npos) << a.error;
      continue;
    }
    ++granted;
    int caps = 0;
    for (const auto& d : a.response.devices()) {
      if (d.container_path().rfind("/dev/nvidia-caps/nvidia-cap", 0) == 0) {
        ++caps;
        EXPECT_EQ(d.host_path(), dev_root + d.container_path());
      }
    }
    EXPECT_EQ(caps, 2) << a.device_ids[0];
  }
  EXPECT_EQ(granted, 6);
  EXPECT_GE(refused, 1);
  auto last = kubelet_->Admit("p/last", "nvidia.com/mig-1g.10gb", 1);
  EXPECT_FALSE(last.admitted);
  EXPECT_NE(last.error.find("no nvidia-caps minor for gpu0/gi13/access"), std::string::npos)
      << last.error;
}

TEST_F(NodeIntegrationTest, AllocateVolumeMounts) {
  StartAgent(Example("inventory/8x-a10.yaml"),
             WriteFile("c.yaml", A10Config("    deviceListStrategy: volume-mounts\n")));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 2);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a.response.mounts_size(), 2) << "distributed: two GPUs";
  for (const auto& m : a.response.mounts()) {
    EXPECT_EQ(m.host_path(), "/dev/null");
    EXPECT_EQ(m.container_path().rfind("/var/run/nvidia-container-devices/GPU-", 0), 0u)
        << m.container_path();
  }
}

TEST_F(NodeIntegrationTest, AllocateCdiOnlySetsNoEnvironment) {
  StartAgent(Example("inventory/8x-a10.yaml"),
             WriteFile("c.yaml", A10Config("    deviceListStrategy: [cdi-annotations, cdi-cri]\n"
                                           "    cdiAnnotationPrefix: cdi.example.org/\n")));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.response.envs_size(), 0);
  ASSERT_EQ(a.response.cdi_devices_size(), 1);
  EXPECT_EQ(a.response.cdi_devices(0).name(),
            "k8s.device-plugin.nvidia.com/gpu=" + BaseId(a.device_ids[0]));
  ASSERT_EQ(a.response.annotations_size(), 1);
  EXPECT_EQ(a.response.annotations().begin()->first.rfind("cdi.example.org/", 0), 0u);
  EXPECT_EQ(a.response.annotations().begin()->second, a.response.cdi_devices(0).name());
}

TEST_F(NodeIntegrationTest, AllocateEnvvarPlusCdiCriAndDeviceSpecs) {
  std::string dev_root = dir_.Sub("root");
  std::filesystem::create_directories(dev_root + "/dev");
  for (std::string n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1",
                        "nvidia2", "nvidia3", "nvidia4", "nvidia5", "nvidia6", "nvidia7"}) {
    std::ofstream(dev_root + "/dev/" + n) << "";
  }
  StartAgent(Example("inventory/8x-a10.yaml"),
             WriteFile("c.yaml", A10Config("    deviceListStrategy: [envvar, cdi-cri]\n"
                                           "    passDeviceSpecs: true\n")),
             {"--dev-root", dev_root});
  ExpectCounts({{"nvidia.com/gpu", 80}});
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"), BaseId(a.device_ids[0]));
  EXPECT_EQ(a.response.cdi_devices_size(), 1);
  std::map<std::string, std::string> specs;
  for (const auto& d : a.response.devices()) {
    specs[d.container_path()] = d.host_path();
    EXPECT_EQ(d.permissions(), "rw");
  }
  EXPECT_EQ(specs.size(), 4u);  // /dev/nvidiaN, ctl, uvm, uvm-tools (no modeset on this host)
  EXPECT_EQ(specs.at("/dev/nvidiactl"), dev_root + "/dev/nvidiactl");
  EXPECT_EQ(specs.at("/dev/nvidia-uvm-tools"), dev_root + "/dev/nvidia-uvm-tools");
  EXPECT_EQ(specs.count("/dev/nvidia-modeset"), 0u);
  int gpu_nodes = 0;
  for (const auto& [c, h] : specs) gpu_nodes += c.size() == strlen("/dev/nvidia0");
  EXPECT_EQ(gpu_nodes, 1);
}

TEST_F(NodeIntegrationTest, FailRequestsGreaterThanOne) {
  // The MIG example sets failRequestsGreaterThanOne.
  StartAgent(Example("inventory/h100-80gb-mig-1g.10gb.yaml"),
             Example("config/h100-80gb-mig-1g.10gb.yaml"));
  ExpectCounts({{"nvidia.com/mig-1g.10gb", 21}});
  auto two = kubelet_->Admit("p/c", "nvidia.com/mig-1g.10gb", 2);
  EXPECT_FALSE(two.admitted);
  EXPECT_NE(two.error.find("maximum request size for shared resources is 1"), std::string::npos)
      << two.error;
  auto one = kubelet_->Admit("q/c", "nvidia.com/mig-1g.10gb", 1);
  EXPECT_TRUE(one.admitted) << one.error;
  EXPECT_EQ(one.response.envs().at("NVIDIA_VISIBLE_DEVICES").rfind("MIG-", 0), 0u);
}

TEST_F(NodeIntegrationTest, UnknownAndMalformedRequestsAreRefused) {
  StartAgent(Example("inventory/8x-a10.yaml"), Example("config/8x-a10.yaml"));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("GPU-not-on-this-node::0");
  v1beta1::AllocateResponse resp;
  grpc::Status s = kubelet_->RawAllocate("nvidia.com/gpu", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("GPU-not-on-this-node::0"), std::string::npos);
  s = kubelet_->RawAllocate("nvidia.com/gpu", v1beta1::AllocateRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(agent_->Running()) << "bad requests never take the agent down";
}

// ---- health and reloads ------------------------------------------------------------------

// The recovery after the quiet period is timed in-process
// (AgentTest.XidMakesGpuUnhealthyAndItRecovers).
TEST_F(NodeIntegrationTest, InjectedXidMakesDevicesUnhealthy) {
  std::string events = WriteFile("events", "");
  std::string config = WriteFile("c.yaml", A10Config("    deviceListStrategy: envvar\n") +
                                               "gpushare:\n  health:\n    recoverAfter: 1h\n");
  StartAgent(Example("inventory/8x-a10.yaml"), config, {"--health-events", events});
  ExpectCounts({{"nvidia.com/gpu", 80}});
  std::string gpu = BaseId(kubelet_->Resource("nvidia.com/gpu")->devices[0].id);
  {
    std::ofstream out(events, std::ios::app);
    out << "xid=13 uuid=" << gpu << "\n";  // ignored by default
    out << "xid=79 uuid=" << gpu << "\n";
  }
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 70, kWait));
  auto r = kubelet_->Resource("nvidia.com/gpu");
  EXPECT_EQ(r->capacity, 80);
  for (const auto& d : r->devices) EXPECT_EQ(d.health == "Unhealthy", BaseId(d.id) == gpu) << d.id;
  EXPECT_TRUE(agent_->WaitForLog("state=Unhealthy", kWait));
}

TEST_F(NodeIntegrationTest, ReloadKeepsAFailingGpuUnhealthy) {
  std::string events = WriteFile("events", "");
  const std::string health = "gpushare:\n  health:\n    recoverAfter: 1h\n";
  std::string config = SighupConfig(A10Config("    deviceListStrategy: envvar\n") + health);
  StartAgent(Example("inventory/8x-a10.yaml"), config,
             {"--health-events", events, "--config-poll-interval", "1h"});
  ExpectCounts({{"nvidia.com/gpu", 80}});
  std::string gpu = BaseId(kubelet_->Resource("nvidia.com/gpu")->devices[0].id);
  std::ofstream(events, std::ios::app) << "xid=79 uuid=" << gpu << "\n";
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 70, kWait));
  // A new config (5 replicas): the failing GPU's 5 replicas come back Unhealthy.
  SighupConfig(A10Config("    deviceListStrategy: envvar\n", 5) + health);
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForLog("event=health_carried_over unhealthy_units=1", kWait));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 35, kWait, 2));
  auto r = kubelet_->Resource("nvidia.com/gpu");
  EXPECT_EQ(r->capacity, 40);
  for (const auto& d : r->devices) EXPECT_EQ(d.health == "Unhealthy", BaseId(d.id) == gpu) << d.id;
}

TEST_F(NodeIntegrationTest, SighupWithBadConfigKeepsServing) {
  std::string config = SighupConfig(A10Config("    deviceListStrategy: envvar\n"));
  StartAgent(Example("inventory/8x-a10.yaml"), config, kSighupOnly);
  ExpectCounts({{"nvidia.com/gpu", 80}});
  SighupConfig(A10Config("    deviceListStrategy: envvar\n", 60));
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(agent_->WaitForLog("event=reload_rejected", kWait));
  EXPECT_TRUE(agent_->WaitForLog("sharing.timeSlicing.resources[0].replicas", kWait))
      << "the field is named";
  EXPECT_TRUE(agent_->Running());
  auto r = kubelet_->Resource("nvidia.com/gpu");
  EXPECT_TRUE(r->connected);
  EXPECT_EQ(r->allocatable, 80);
  EXPECT_EQ(r->registrations, 1);
  EXPECT_TRUE(kubelet_->Admit("p/c", "nvidia.com/gpu", 1).admitted);
  // A good config is taken on the next SIGHUP.
  SighupConfig(A10Config("    deviceListStrategy: envvar\n", 5));
  agent_->Signal(SIGHUP);
  ExpectCounts({{"nvidia.com/gpu", 40}}, 2);
  EXPECT_EQ(kubelet_->Resource("nvidia.com/gpu")->registrations, 2) << "one reload per SIGHUP";
}

TEST_F(NodeIntegrationTest, SigtermRemovesSocketsAndExitsZero) {
  StartAgent(Example("inventory/mixed.yaml"), Example("config/mixed.yaml"));
  ExpectCounts({{"nvidia.com/gpu", 1},
                {"nvidia.com/gpu.shared", 20},
                {"nvidia.com/mig-3g.40gb", 3},
                {"nvidia.com/mig-2g.20gb", 6}});
  std::vector<std::string> sockets;
  for (const auto& r : kubelet_->Resources()) sockets.push_back(plugin_dir_ + "/" + r.endpoint);
  ASSERT_EQ(sockets.size(), 4u);
  for (const auto& s : sockets) EXPECT_TRUE(Exists(s)) << s;
  agent_->Signal(SIGTERM);
  auto rc = agent_->Wait(kWait);
  ASSERT_TRUE(rc.has_value()) << "did not exit";
  EXPECT_EQ(*rc, 0);
  for (const auto& s : sockets) EXPECT_FALSE(Exists(s)) << s;
  EXPECT_TRUE(Exists(kubelet_->kubelet_socket()));
  EXPECT_TRUE(kubelet_->WaitFor(
      [&] { return kubelet_->Resource("nvidia.com/gpu.shared")->allocatable == 0; }, kWait));
}

TEST_F(NodeIntegrationTest, SigintAlsoExitsZero) {
  StartAgent(Example("inventory/8x-a10.yaml"), Example("config/8x-a10.yaml"));
  ExpectCounts({{"nvidia.com/gpu", 80}});
  agent_->Signal(SIGINT);
  auto rc = agent_->Wait(kWait);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
}

// ---- invalid configs ---------------------------------------------------------------------

struct BadConfig {
  const char* name;
  std::string yaml;
  const char* field;  // must appear in the output
};

class InvalidConfigTest : public NodeIntegrationTest,
                          public ::testing::WithParamInterface<BadConfig> {};

TEST_P(InvalidConfigTest, ExitsTwoNamingTheField) {
  const BadConfig& c = GetParam();
  StartAgent(Example("inventory/8x-a10.yaml"), WriteFile("bad.yaml", c.yaml));
  auto rc = agent_->Wait(kWait);
  ASSERT_TRUE(rc.has_value()) << "still running with an invalid config";
  EXPECT_EQ(*rc, 2) << agent_->Log();
  EXPECT_NE(agent_->Log().find(c.field), std::string::npos) << agent_->Log();
  EXPECT_TRUE(kubelet_->RegistrationLog().empty()) << "nothing is served";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(plugin_dir_, ec)) {
    EXPECT_EQ(e.path().filename(), "kubelet.sock") << "no socket of ours";
  }
}

const std::string kTs = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n";

INSTANTIATE_TEST_SUITE_P(
    Matrix, InvalidConfigTest,
    ::testing::Values(
        BadConfig{"replicas_too_many", kTs + "    - name: nvidia.com/gpu\n      replicas: 60\n",
                  "sharing.timeSlicing.resources[0].replicas"},
        BadConfig{"replicas_one", kTs + "    - name: nvidia.com/gpu\n      replicas: 1\n",
                  "sharing.timeSlicing.resources[0].replicas"},
        BadConfig{"replicas_wrong_type", kTs + "    - name: nvidia.com/gpu\n      replicas: ten\n",
                  "sharing.timeSlicing.resources[0].replicas"},
        BadConfig{"unknown_key", "version: v1\nflags:\n  migStrategi: none\n", "migStrategi"},
        BadConfig{"bad_mig_strategy", "version: v1\nflags:\n  migStrategy: sometimes\n",
                  "flags.migStrategy"},
        BadConfig{
            "bad_list_strategy",
            "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, carrier-pigeon]\n",
            "flags.plugin.deviceListStrategy"},
        BadConfig{"bad_id_strategy",
                  "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n",
                  "flags.plugin.deviceIDStrategy"},
        BadConfig{"bad_version", "version: v2\n", "version"},
        BadConfig{"selector_matches_nothing",
                  kTs + "    - name: nvidia.com/gpu\n      devices: [9]\n      replicas: 4\n",
                  "sharing.timeSlicing.resources[0].devices"},
        BadConfig{"overlapping_selectors",
                  kTs + "    - name: nvidia.com/gpu\n      devices: [0, 1]\n      replicas: 4\n"
                        "    - name: nvidia.com/gpu\n      devices: [1, 2]\n      rename: "
                        "nvidia.com/gpu.other\n"
                        "      replicas: 2\n",
                  "sharing.timeSlicing.resources[1].devices"},
        BadConfig{
            "bad_rename",
            kTs + "    - name: nvidia.com/gpu\n      rename: Not_A/Valid/Name\n      replicas: 4\n",
            "sharing.timeSlicing.resources[0].rename"},
        BadConfig{"ceiling_out_of_range", "version: v1\ngpushare:\n  maxClientsPerGpu: 0\n",
                  "gpushare.maxClientsPerGpu"},
        BadConfig{"not_yaml", "version: v1\nflags: [unclosed\n", "bad.yaml"}),
    [](const ::testing::TestParamInfo<BadConfig>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace gpushare
