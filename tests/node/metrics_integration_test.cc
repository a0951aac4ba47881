// Integration: the real gpushare-node's /metrics, /healthz and /readyz against the kubelet double
// (registration, Allocate, PodResources) and the API-server double (TokenReview,
// SubjectAccessReview, Events): a pod admitted through kubelet appears with its limit and, once
// its accounting region exists (written here as libgpushare-cuda.so writes it, with the region's
// mutex held by the test throughout), with its usage and last kernel launch; refused Allocates
// are counted by reason and recorded as Events on the pod they were for; callers without a token or
// the permission are refused; --metrics-auth=none is refused on a non-loopback address.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "proto/deviceplugin/v1beta1/api.pb.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"
#include "tests/node/region_fixture.h"

namespace gpushare {
namespace {

using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr uint64_t kGiB = uint64_t{1} << 30;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class NodeMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    fakes::FakeKubeletOptions ko{plugin_dir_};
    ko.pod_resources_socket = dir_.Sub("pod-resources.sock");
    kubelet_ = std::make_unique<FakeKubelet>(ko);
    ASSERT_TRUE(kubelet_->Start().ok());
    ASSERT_TRUE(api_.Start().ok());
    api_.SetIdentity("prom-token", {"system:serviceaccount:monitoring:prometheus", "u1", {}});
    api_.SetIdentity("app-token", {"system:serviceaccount:default:app", "u2", {}});
    api_.Grant({"system:serviceaccount:monitoring:prometheus", "/metrics", "get"});
    kubeconfig_ = dir_.Sub("kubeconfig");
    std::ofstream(kubeconfig_) << fakes::PlainKubeconfig(api_.url());
    std::filesystem::create_directories(dir_.Sub("lib"));
    std::ofstream(dir_.Sub("lib/libgpushare-cuda.so")) << "not loaded by this test";
    std::ofstream(dir_.Sub("node.yaml"))
        << "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
           "      replicas: 4\ngpushare:\n  timeSlicing:\n    memoryLimit: evenSplit\n"
           "  interposer:\n    hostDir: "
        << dir_.Sub("lib") << "\n    stateDir: " << dir_.Sub("state") << "\n";
    port_ = FreePort();
  }
  void TearDown() override {
    testing::StopAgent(agent_.get(), HasFailure());
    api_.Stop();
  }
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "--inventory",
        std::string(GPUSHARE_SOURCE_DIR) + "/examples/inventory/8x-a10.yaml",
        "--config",
        dir_.Sub("node.yaml"),
        "--device-plugin-dir",
        plugin_dir_,
        "--pod-resources-socket",
        dir_.Sub("pod-resources.sock"),
        "--kubeconfig",
        kubeconfig_,
        "--node-name",
        "n1",
        "--gc-interval",
        "0",
        "--metrics-listen",
        "127.0.0.1:" + std::to_string(port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args, dir_.Sub("agent.log"));
    ASSERT_TRUE(agent_->started());
  }
  httplib::Result Get(const std::string& path, const std::string& token = "") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Get(path, h);
  }
  // The state directory of the one Allocate made so far.
  std::string StateDir() {
    for (const auto& e : std::filesystem::directory_iterator(dir_.Sub("state")))
      return e.path().string();
    return "";
  }

  TempDir dir_;
  std::string plugin_dir_, kubeconfig_;
  int port_ = 0;
  fakes::FakeApiServer api_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<AgentProcess> agent_;
};

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST_F(NodeMetricsTest, ScrapeOfAPodAllocatedThroughKubelet) {
  Start();
  // The probes answer while the agent starts, without a token.
  ASSERT_TRUE(agent_->WaitForLog("event=metrics_listening", 20s));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 32, 20s));
  auto health = Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    auto r = Get("/readyz");
    ready = r && r->status == 200;
    if (!ready) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(ready);

  fakes::FakePod pod;
  pod.namespace_ = "ns1";
  pod.name = "train";
  pod.containers = {{"main", {{"nvidia.com/gpu", 1}}}};
  fakes::PodAdmission adm = kubelet_->AdmitPod(pod);
  ASSERT_TRUE(adm.admitted) << adm.error;
  const std::string device = adm.steps.at(0).admission.device_ids.at(0);
  const std::string uuid = device.substr(0, device.find("::"));

  // The container's first CUDA process would create its region: done here, flock held as the
  // library holds it, and the region's mutex locked for the rest of the test (a scrape must not
  // need it).
  const std::string dir = StateDir();
  ASSERT_FALSE(dir.empty());
  testing::MappedRegion region(dir + "/shared/region");
  ASSERT_NE(region.file(), nullptr);
  testing::AddDevice(region.file(), 0, uuid, 6 * kGiB, 0);
  testing::AddProcess(region.file(), 0, 1, 0, 0, kGiB);
  region.file()->devices[0].last_launch_s =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()) -
      5;
  ASSERT_EQ(::flock(region.fd(), LOCK_SH), 0);
  ASSERT_EQ(pthread_mutex_lock(&region.file()->header.mutex), 0);

  // A refused Allocate: an unknown device, for the one pod of n1 in admission that asks for one
  // device. Kubelet gets the reason code in front of the message.
  api_.Upsert(fakes::Resource::kPods,
              {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata", {{"name", "waiting"}, {"namespace", "ns1"}}},
               {"spec",
                {{"nodeName", "n1"},
                 {"containers",
                  {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
               {"status", {{"phase", "Pending"}}}});
  v1beta1::AllocateRequest bad;
  bad.add_container_requests()->add_devices_ids("GPU-bogus::0");
  v1beta1::AllocateResponse resp;
  grpc::Status refused = kubelet_->RawAllocate("nvidia.com/gpu", bad, &resp);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.error_message().rfind("UnknownDevice: ", 0), 0u) << refused.error_message();

  auto anon = Get("/metrics");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  auto app = Get("/metrics", "app-token");
  ASSERT_TRUE(app);
  EXPECT_EQ(app->status, 403);
  auto m = Get("/metrics", "prom-token");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200) << m->body;
  const std::string c =
      "container=\"main\",namespace=\"ns1\",node=\"n1\",pod=\"train\",uuid=\"" + uuid + "\"";
  const std::vector<std::string> want = {
      "gpushare_container_memory_limit_bytes{" + c + "} 6442450944",
      "gpushare_container_memory_used_bytes{" + c + "} 1073741824",
      "gpushare_container_compute_limit_ratio{" + c + "} 1",
      "gpushare_node_allocate_total{resource=\"nvidia.com/gpu\"} 1",
      "gpushare_node_allocate_refusals_total{reason=\"UnknownDevice\",resource=\"nvidia.com/"
      "gpu\"} 1",
      "gpushare_node_registrations_total{resource=\"nvidia.com/gpu\"} 1",
      "gpushare_node_kubelet_restarts_total 0",
  };
  for (const std::string& line : want) EXPECT_TRUE(HasLine(m->body, line)) << line;
  if (std::getenv("GPUSHARE_PRINT_SCRAPE") != nullptr) std::cout << m->body;
  EXPECT_NE(m->body.find("gpushare_container_seconds_since_last_kernel_launch{" + c + "} "),
            std::string::npos);
  EXPECT_NE(m->body.find("gpushare_gpu_clients{index=\""), std::string::npos);
  EXPECT_NE(m->body.find("# HELP gpushare_gpu_memory_used_bytes"), std::string::npos);
  pthread_mutex_unlock(&region.file()->header.mutex);

  // The refusal became a Warning Event on that pod, with the reason code.
  bool event = false;
  for (int i = 0; i < 200 && !event; ++i) {
    for (const nlohmann::json& e : api_.List(fakes::Resource::kEvents)) {
      event =
          event || (e.value("reason", "") == "UnknownDevice" && e.value("type", "") == "Warning" &&
                    e["involvedObject"].value("kind", "") == "Pod" &&
                    e["involvedObject"].value("namespace", "") == "ns1" &&
                    e["involvedObject"].value("name", "") == "waiting");
    }
    if (!event) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(event);
}

TEST_F(NodeMetricsTest, AuthNoneOnlyOnLoopback) {
  Start({"--metrics-auth", "none"});
  ASSERT_TRUE(agent_->WaitForLog("event=metrics_listening", 20s));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 32, 20s));
  auto m = Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("# TYPE gpushare_build_info gauge"), std::string::npos);
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(10s), std::optional<int>(0));

  agent_ = std::make_unique<AgentProcess>(
      std::vector<std::string>{
          "--inventory", std::string(GPUSHARE_SOURCE_DIR) + "/examples/inventory/8x-a10.yaml",
          "--device-plugin-dir", plugin_dir_, "--metrics-listen", ":0", "--metrics-auth", "none"},
      dir_.Sub("agent2.log"));
  EXPECT_EQ(agent_->Wait(20s), std::optional<int>(2));
  EXPECT_NE(agent_->Log().find("--metrics-auth=none: only allowed with a loopback"),
            std::string::npos)
      << agent_->Log();
}

}  // namespace
}  // namespace gpushare
