// DevicePluginServer over real unix sockets, against the kubelet double.
#include "deviceplugin/server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include "core/reasons.h"
#include "proto/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"

namespace gpushare::deviceplugin {
namespace {

using gpushare::fakes::FakeKubelet;
using gpushare::testing::GpuUuid;
using gpushare::testing::MakeGpuResource;
using gpushare::testing::MakeMigResource;
using gpushare::testing::MigUuid;
using gpushare::testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kWait = 10s;  // generous: never a timing assertion

bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubelet_ = std::make_unique<FakeKubelet>(gpushare::fakes::FakeKubeletOptions{dir_.path()});
    ASSERT_TRUE(kubelet_->Start().ok());
  }

  std::unique_ptr<DevicePluginServer> StartServer(PlannedResource res, PluginFlags flags = {}) {
    DevicePluginServerOptions o;
    o.plugin_dir = dir_.path();
    o.resource = std::move(res);
    o.plugin = flags;
    o.on_stream_end = [this](uint64_t) { stream_ends_++; };
    auto s = DevicePluginServer::Start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  TempDir dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::atomic<int> stream_ends_{0};
};

TEST_F(ServerTest, RegistersAndAdvertisesAllDevices) {
  auto server = StartServer(MakeGpuResource(8, 10));
  ASSERT_TRUE(server);
  EXPECT_TRUE(Exists(dir_.Sub("gpushare-gpu.sock")));
  ASSERT_TRUE(server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 80, kWait));
  auto r = kubelet_->Resource("nvidia.com/gpu");
  EXPECT_EQ(r->capacity, 80);
  EXPECT_EQ(r->endpoint, "gpushare-gpu.sock");
  EXPECT_TRUE(r->options.get_preferred_allocation_available());
  EXPECT_FALSE(r->options.pre_start_required());
  EXPECT_EQ(r->devices.front().id.find("GPU-"), 0u);
  auto log = kubelet_->RegistrationLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].version, "v1beta1");
  EXPECT_TRUE(log[0].accepted);
}

TEST_F(ServerTest, NumaTopologyIsAdvertised) {
  auto server = StartServer(MakeGpuResource(4, 1, 2));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  auto r = kubelet_->Resource("nvidia.com/gpu");
  for (const auto& d : r->devices) {
    ASSERT_EQ(d.numa_nodes.size(), 1u) << d.id;
  }
  EXPECT_EQ(r->devices.back().numa_nodes[0], 1);
}

TEST_F(ServerTest, AdmitsThroughPreferredAllocationAndAllocate) {
  auto server = StartServer(MakeGpuResource(4, 10));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 40, kWait));
  std::set<std::string> gpus;
  for (int i = 0; i < 4; ++i) {
    auto a = kubelet_->Admit("pod" + std::to_string(i) + "/c", "nvidia.com/gpu", 1);
    ASSERT_TRUE(a.admitted) << a.error;
    EXPECT_TRUE(a.preferred_called);
    ASSERT_EQ(a.preferred.size(), 1u);
    EXPECT_EQ(a.device_ids, a.preferred);
    gpus.insert(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"));
  }
  EXPECT_EQ(gpus.size(), 4u) << "distributed: one container per GPU";
  // Distributed: the next two-replica container spreads over two GPUs.
  auto two = kubelet_->Admit("big/c", "nvidia.com/gpu", 2);
  ASSERT_TRUE(two.admitted) << two.error;
  EXPECT_NE(two.device_ids[0].substr(0, two.device_ids[0].find("::")),
            two.device_ids[1].substr(0, two.device_ids[1].find("::")));
  // Two replicas of one GPU collapse to one UUID.
  v1beta1::AllocateRequest same;
  same.add_container_requests()->add_devices_ids(GpuUuid(2) + "::8");
  same.mutable_container_requests(0)->add_devices_ids(GpuUuid(2) + "::9");
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(kubelet_->RawAllocate("nvidia.com/gpu", same, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), GpuUuid(2));
}

TEST_F(ServerTest, MalformedAndBadRequestsGetErrors) {
  PlannedResource res = MakeGpuResource(2, 4);
  res.fail_requests_greater_than_one = true;
  auto server = StartServer(res);
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));

  v1beta1::AllocateRequest empty;
  v1beta1::AllocateResponse resp;
  grpc::Status s = kubelet_->RawAllocate("nvidia.com/gpu", empty, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("container_requests"), std::string::npos);

  v1beta1::AllocateRequest unknown;
  unknown.add_container_requests()->add_devices_ids("GPU-nope::1");
  s = kubelet_->RawAllocate("nvidia.com/gpu", unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("GPU-nope::1"), std::string::npos);

  v1beta1::AllocateRequest two;
  auto* c = two.add_container_requests();
  c->add_devices_ids(GpuUuid(0) + "::0");
  c->add_devices_ids(GpuUuid(1) + "::0");
  s = kubelet_->RawAllocate("nvidia.com/gpu", two, &resp);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("maximum request size for shared resources is 1"),
            std::string::npos);
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 2);
  EXPECT_FALSE(a.admitted);
  EXPECT_NE(a.error.find("failRequestsGreaterThanOne"), std::string::npos);

  // Several containers in one request: exactly one response each.
  v1beta1::AllocateRequest multi;
  multi.add_container_requests()->add_devices_ids(GpuUuid(0) + "::1");
  multi.add_container_requests()->add_devices_ids(GpuUuid(1) + "::1");
  multi.add_container_requests()->add_devices_ids(GpuUuid(1) + "::2");
  v1beta1::AllocateResponse mresp;
  s = kubelet_->RawAllocate("nvidia.com/gpu", multi, &mresp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(mresp.container_responses_size(), 3);

  v1beta1::PreferredAllocationRequest bad;
  bad.add_container_requests()->set_allocation_size(-3);
  v1beta1::PreferredAllocationResponse presp;
  s = kubelet_->RawPreferred("nvidia.com/gpu", bad, &presp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = kubelet_->RawPreferred("nvidia.com/gpu", {}, &presp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// kubelet turns a refused Allocate into the pod's UnexpectedAdmissionError with the gRPC
// message: it starts with the core/reasons.h code (the refusal counter's label).
TEST_F(ServerTest, RefusalMessagesStartWithTheReasonCode) {
  PlannedResource res = MakeGpuResource(2, 4);
  res.fail_requests_greater_than_one = true;
  auto server = StartServer(res);
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  auto refuse = [&](const std::string& resource, const std::vector<std::string>& ids) {
    v1beta1::AllocateRequest req;
    if (!ids.empty()) {
      auto* c = req.add_container_requests();
      for (const std::string& id : ids) c->add_devices_ids(id);
    }
    v1beta1::AllocateResponse resp;
    grpc::Status s = kubelet_->RawAllocate(resource, req, &resp);
    EXPECT_FALSE(s.ok());
    return s.error_message();
  };
  auto starts = [](const std::string& m, const std::string& prefix) {
    return m.rfind(prefix, 0) == 0;
  };
  std::string m = refuse("nvidia.com/gpu", {"GPU-nope::1"});
  EXPECT_EQ(m, "UnknownDevice: resource nvidia.com/gpu: unknown device IDs: GPU-nope::1");
  m = refuse("nvidia.com/gpu", {GpuUuid(0) + "::0", GpuUuid(0) + "::0"});
  EXPECT_TRUE(starts(m, "InvalidRequest: resource nvidia.com/gpu: device IDs requested more")) << m;
  m = refuse("nvidia.com/gpu", {GpuUuid(0) + "::0", GpuUuid(1) + "::0"});
  EXPECT_TRUE(starts(m, "InvalidRequest: ")) << m;
  m = refuse("nvidia.com/gpu", {});
  EXPECT_TRUE(starts(m, "InvalidRequest: resource nvidia.com/gpu: AllocateRequest has no")) << m;
  EXPECT_TRUE(server->SetHealth({{GpuUuid(1) + "::3", false}}));
  m = refuse("nvidia.com/gpu", {GpuUuid(1) + "::3"});
  EXPECT_TRUE(starts(m, "GpuUnhealthy: resource nvidia.com/gpu: devices are Unhealthy: ")) << m;

  PluginFlags flags;
  flags.pass_device_specs = true;
  flags.nvidia_dev_root = dir_.Sub("no-dev");  // no mig-minors: the MIG caps are unknown
  auto mig = StartServer(MakeMigResource(1, 1, 1), flags);
  ASSERT_TRUE(mig && mig->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/mig-1g.10gb", 1, kWait));
  m = refuse("nvidia.com/mig-1g.10gb", {MigUuid(0, 0)});
  EXPECT_TRUE(starts(m, "DeviceNodesUnavailable: passDeviceSpecs: no nvidia-caps minor")) << m;
}

TEST_F(ServerTest, HealthChangesArePushed) {
  auto server = StartServer(MakeGpuResource(2, 3));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 6, kWait));
  std::map<std::string, bool> h;
  for (int n = 0; n < 3; ++n) h[GpuUuid(1) + "::" + std::to_string(n)] = false;
  EXPECT_TRUE(server->SetHealth(h));
  EXPECT_FALSE(server->SetHealth(h));  // no change, nothing sent
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 3, kWait));
  EXPECT_EQ(kubelet_->Resource("nvidia.com/gpu")->capacity, 6);
  EXPECT_EQ(server->healthy_count(), 3);
  // Unhealthy devices are refused by Allocate.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(GpuUuid(1) + "::0");
  v1beta1::AllocateResponse resp;
  grpc::Status s = kubelet_->RawAllocate("nvidia.com/gpu", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  for (auto& [id, v] : h) v = true;
  EXPECT_TRUE(server->SetHealth(h));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 6, kWait));
}

TEST_F(ServerTest, DroppedStreamIsReportedAndStopIsNot) {
  auto server = StartServer(MakeMigResource(1, 7, 3));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/mig-1g.10gb", 21, kWait));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return server->open_streams() == 1; }, kWait));
  ASSERT_TRUE(kubelet_->DropStream("nvidia.com/mig-1g.10gb"));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return stream_ends_.load() == 1; }, kWait));
  // Kubelet marks everything unhealthy and does not reopen the stream by itself.
  auto r = kubelet_->Resource("nvidia.com/mig-1g.10gb");
  EXPECT_EQ(r->allocatable, 0);
  EXPECT_FALSE(r->connected);
  // Registering again brings the devices back.
  ASSERT_TRUE(server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/mig-1g.10gb", 21, kWait, 2));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return server->open_streams() == 1; }, kWait));
  server->Stop();
  EXPECT_EQ(stream_ends_.load(), 1) << "our own Stop is not a dropped stream";
  EXPECT_FALSE(Exists(dir_.Sub("gpushare-mig-1g.10gb.sock")));
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] { return kubelet_->Resource("nvidia.com/mig-1g.10gb")->allocatable == 0; }, kWait));
}

TEST_F(ServerTest, StaleSocketIsReplacedAndOtherFilesAreNot) {
  // A socket file left behind by a crashed process.
  std::string path = dir_.Sub("gpushare-gpu.sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  ASSERT_TRUE(Exists(path));
  auto server = StartServer(MakeGpuResource(1, 1));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 1, kWait));
  server->Stop();
  EXPECT_FALSE(Exists(path));

  std::ofstream(path) << "not a socket";
  DevicePluginServerOptions o;
  o.plugin_dir = dir_.path();
  o.resource = MakeGpuResource(1, 1);
  auto refused = DevicePluginServer::Start(std::move(o));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not a socket"), std::string::npos);
  EXPECT_TRUE(Exists(path));
}

TEST_F(ServerTest, RegisterFailsClearlyWithoutKubelet) {
  kubelet_->Stop();
  ::unlink(kubelet_->kubelet_socket().c_str());
  auto server = StartServer(MakeGpuResource(1, 1));
  ASSERT_TRUE(server);
  Status s = server->Register();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kubelet.sock"), std::string::npos) << s.message();
}

TEST_F(ServerTest, KubeletRestartDeletesOurSocket) {
  auto server = StartServer(MakeGpuResource(1, 2));
  ASSERT_TRUE(server && server->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 2, kWait));
  std::ofstream(dir_.Sub("kubelet_internal_checkpoint")) << "{}";
  ASSERT_TRUE(kubelet_->Restart().ok());
  EXPECT_FALSE(Exists(dir_.Sub("gpushare-gpu.sock")));
  EXPECT_TRUE(Exists(dir_.Sub("kubelet_internal_checkpoint")));
  EXPECT_TRUE(Exists(kubelet_->kubelet_socket()));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return stream_ends_.load() == 1; }, kWait));
  EXPECT_EQ(kubelet_->Resource("nvidia.com/gpu")->capacity, 0);
}

TEST_F(ServerTest, DecoratorAddsToTheAnswerAndCanRefuse) {
  DevicePluginServerOptions o;
  o.plugin_dir = dir_.path();
  o.resource = MakeGpuResource(2, 2);
  o.steps.push_back(
      {reasons::kInvalidRequest, [](const ResolvedRequest& r, ContainerAllocation* a) {
         if (r.devices.size() > 1)
           return Status::ResourceExhausted("decorator refuses " +
                                            std::to_string(r.devices.size()));
         a->envs["GPUSHARE_TEST"] = r.devices[0]->device_uuid;
         a->mounts.push_back({"/usr/lib/gpushare", "/opt/gpushare", true});
         return Status::Ok();
       }});
  auto server = DevicePluginServer::Start(std::move(o));
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  auto a = kubelet_->Admit("p/c", "nvidia.com/gpu", 1);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.response.envs().at("GPUSHARE_TEST"), a.response.envs().at("NVIDIA_VISIBLE_DEVICES"));
  ASSERT_EQ(a.response.mounts_size(), 1);
  EXPECT_TRUE(a.response.mounts(0).read_only());
  auto b = kubelet_->Admit("q/c", "nvidia.com/gpu", 2);
  EXPECT_FALSE(b.admitted);
  EXPECT_NE(b.error.find("decorator refuses 2"), std::string::npos);
}

TEST_F(ServerTest, PreStartContainerAnswersEmpty) {
  auto server = StartServer(MakeGpuResource(1, 2));
  ASSERT_TRUE(server);
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + server->socket_path(), grpc::InsecureChannelCredentials()));
  v1beta1::PreStartContainerRequest req;
  req.add_devices_ids(GpuUuid(0) + "::1");
  v1beta1::PreStartContainerResponse resp;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub->PreStartContainer(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.ByteSizeLong(), 0u);
}

// The double is only useful if it refuses what kubelet refuses.
TEST_F(ServerTest, KubeletDoubleValidatesRegistrations) {
  auto channel =
      grpc::CreateChannel("unix:" + kubelet_->kubelet_socket(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  auto call = [&](const std::string& version, const std::string& name,
                  const std::string& endpoint) {
    v1beta1::RegisterRequest r;
    r.set_version(version);
    r.set_resource_name(name);
    r.set_endpoint(endpoint);
    grpc::ClientContext ctx;
    v1beta1::Empty e;
    return stub->Register(&ctx, r, &e);
  };
  grpc::Status s = call("v1alpha", "nvidia.com/gpu", "x.sock");
  EXPECT_NE(s.error_message().find("not supported by kubelet"), std::string::npos);
  // The version is checked before the name.
  s = call("v1alpha", "gpu", "x.sock");
  EXPECT_NE(s.error_message().find("not supported by kubelet"), std::string::npos);
  for (const char* bad :
       {"gpu", "kubernetes.io/gpu", "NVIDIA.com/gpu", "nvidia.com/", "nvidia.com/-gpu"}) {
    s = call("v1beta1", bad, "x.sock");
    EXPECT_NE(s.error_message().find("is invalid"), std::string::npos) << bad;
  }
  EXPECT_TRUE(gpushare::fakes::IsValidExtendedResourceName("nvidia.com/mig-1g.10gb"));
  EXPECT_TRUE(gpushare::fakes::IsValidExtendedResourceName("aliyun.com/gpu-mem"));
  // A valid name whose endpoint is not serving: the connect-back fails inside Register.
  gpushare::fakes::FakeKubelet quick({dir_.path() + "/q", std::chrono::milliseconds(300)});
  ASSERT_TRUE(quick.Start().ok());
  auto qstub = v1beta1::Registration::NewStub(
      grpc::CreateChannel("unix:" + quick.kubelet_socket(), grpc::InsecureChannelCredentials()));
  v1beta1::RegisterRequest r;
  r.set_version("v1beta1");
  r.set_resource_name("nvidia.com/gpu");
  r.set_endpoint("nobody.sock");
  grpc::ClientContext ctx;
  v1beta1::Empty e;
  s = qstub->Register(&ctx, r, &e);
  EXPECT_NE(s.error_message().find("failed to dial"), std::string::npos) << s.error_message();
}

// ---- Register without blocking ------------------------------------------------------------

// A Register whose socket kubelet cannot dial back (it was deleted): kubelet dials for 10 s.
TEST_F(ServerTest, RegisterInFlightIsCancelledWhenAsked) {
  auto server = StartServer(MakeGpuResource(1, 1));
  ASSERT_TRUE(server);
  ::unlink(server->socket_path().c_str());
  std::promise<Status> outcome;
  server->StartRegister([&](const Status& st) { outcome.set_value(st); });
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->registrations_in_flight() == 1; }, kWait));
  server->CancelRegister();
  auto f = outcome.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready) << "a cancelled Register answers at once";
  Status st = f.get();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("register nvidia.com/gpu"), std::string::npos) << st.message();
}

TEST_F(ServerTest, StopCancelsRegistersAndWaitsForTheirCallbacks) {
  auto server = StartServer(MakeGpuResource(1, 1));
  ASSERT_TRUE(server);
  ::unlink(server->socket_path().c_str());
  std::atomic<int> called{0};
  server->StartRegister([&](const Status&) { called++; });
  server->StartRegister([&](const Status&) { called++; });
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->registrations_in_flight() == 2; }, kWait));
  server->Stop();
  EXPECT_EQ(called.load(), 2) << "Stop returns after every callback ran";
  Status late;
  server->StartRegister([&](const Status& st) { late = st; });
  EXPECT_EQ(late.code(), StatusCode::kAborted) << "a stopped server does not register";
}

TEST_F(ServerTest, RegistersRunSideBySide) {
  auto slow = StartServer(MakeGpuResource(1, 1));
  auto fast = StartServer(MakeMigResource(1, 2, 1));
  ASSERT_TRUE(slow && fast);
  ::unlink(slow->socket_path().c_str());  // its Register hangs in kubelet's dial-back
  std::promise<Status> slow_outcome;
  slow->StartRegister([&](const Status& st) { slow_outcome.set_value(st); });
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->registrations_in_flight() == 1; }, kWait));
  EXPECT_TRUE(fast->Register().ok()) << "one Register never waits for another";
  EXPECT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/mig-1g.10gb", 2, kWait));
  slow->CancelRegister();
  EXPECT_FALSE(slow_outcome.get_future().get().ok());
}

// ---- the double's connect-back, as kubelet does it ---------------------------------------

v1beta1::RegisterRequest RegisterFor(const std::string& endpoint) {
  v1beta1::RegisterRequest r;
  r.set_version("v1beta1");
  r.set_resource_name("nvidia.com/gpu");
  r.set_endpoint(endpoint);
  return r;
}

grpc::Status RawRegister(const std::string& kubelet_socket, const std::string& endpoint,
                         std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
  auto stub = v1beta1::Registration::NewStub(
      grpc::CreateChannel("unix:" + kubelet_socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  v1beta1::Empty e;
  return stub->Register(&ctx, RegisterFor(endpoint), &e);
}

TEST_F(ServerTest, KubeletDoubleRestartAbandonsDialsInProgress) {
  grpc::Status s;
  std::thread caller([&] { s = RawRegister(kubelet_->kubelet_socket(), "nobody.sock"); });
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->registrations_in_flight() == 1; }, kWait));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(kubelet_->Restart().ok());
  caller.join();
  // A restart is a process death: the call ends, the 10 s dial is not waited out (a generous
  // liveness bound, not a timing measurement).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(kubelet_->registrations_in_flight(), 0);
  EXPECT_FALSE(kubelet_->Resource("nvidia.com/gpu").has_value())
      << "nothing registered by a dead kubelet";
}

TEST_F(ServerTest, KubeletDoubleDialBackFindsASocketThatComesBack) {
  PlannedResource res = MakeGpuResource(1, 2);
  grpc::Status s;
  std::thread caller([&] { s = RawRegister(kubelet_->kubelet_socket(), res.socket_name); });
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->registrations_in_flight() == 1; }, kWait));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the first dial found nothing
  auto server = StartServer(res);
  ASSERT_TRUE(server);
  caller.join();
  EXPECT_TRUE(s.ok()) << s.error_message()
                      << ": found at gRPC's next connection attempt, within the 10 s";
  EXPECT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 2, kWait));
}

TEST_F(ServerTest, KubeletDoubleDialOutlivesTheCallerUnlessItFollowsIt) {
  for (bool follows : {false, true}) {
    SCOPED_TRACE(follows ? "dial_follows_caller" : "dial outlives the caller");
    gpushare::fakes::FakeKubeletOptions o;
    o.plugin_dir = dir_.Sub(follows ? "f" : "o");
    o.dial_follows_caller = follows;
    FakeKubelet k(o);
    ASSERT_TRUE(k.Start().ok());
    PlannedResource res = MakeGpuResource(1, 2);
    grpc::Status s =
        RawRegister(k.kubelet_socket(), res.socket_name, std::chrono::milliseconds(200));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    if (follows) {
      EXPECT_TRUE(k.WaitFor([&] { return k.registrations_in_flight() == 0; }, kWait))
          << "the dial ends with the call";
      continue;
    }
    EXPECT_EQ(k.registrations_in_flight(), 1) << "kubelet keeps dialing after the plugin gave up";
    DevicePluginServerOptions so;
    so.plugin_dir = o.plugin_dir;
    so.resource = res;
    auto server = DevicePluginServer::Start(std::move(so));
    ASSERT_TRUE(server.ok());
    EXPECT_TRUE(k.WaitForAllocatable("nvidia.com/gpu", 2, kWait))
        << "and registers late when the socket comes";
  }
}

TEST_F(ServerTest, KubeletDoubleCleansBeforeItListens) {
  auto server = StartServer(MakeGpuResource(1, 1));
  ASSERT_TRUE(server);
  int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(::inotify_add_watch(fd, dir_.path().c_str(), IN_CREATE | IN_DELETE), 0);
  ASSERT_TRUE(kubelet_->Restart().ok());
  std::vector<std::string> seen;
  alignas(inotify_event) char buf[4096];
  ssize_t len = ::read(fd, buf, sizeof(buf));
  for (char* q = buf; len > 0 && q < buf + len;) {
    auto* ev = reinterpret_cast<inotify_event*>(q);
    q += sizeof(inotify_event) + ev->len;
    seen.push_back(std::string(ev->mask & IN_CREATE ? "+" : "-") + ev->name);
  }
  ::close(fd);
  // Stop removes kubelet.sock; Start deletes our socket, then kubelet.sock appears.
  EXPECT_EQ(seen,
            (std::vector<std::string>{"-kubelet.sock", "-gpushare-gpu.sock", "+kubelet.sock"}));
}

}  // namespace
}  // namespace gpushare::deviceplugin
