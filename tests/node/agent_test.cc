// The agent in-process (no signals) against the kubelet double: registration, lifecycle after
// kubelet restarts and dropped streams, health events, reloads. The real binary is covered by
// node_integration_test.
//
// The agent runs on a SimulatedClock: its timers (debounce, backoff, settle, health recovery,
// the check of the files by state) fire only when a test advances the clock (AdvanceUntil),
// never by waiting. WaitFor waits (a bounded real time) for I/O only: the agent serving,
// kubelet's double registering it. A re-registration within 2 s of simulated time, with the
// check by state 10 s away, is one the inotify watch caused (the 2 s promise held by event);
// with the watch off (watch_ = false) the check every 1 s is what keeps it.
#include "node/agent.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "deviceplugin/plugin_lifecycle.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/log_capture.h"

namespace gpushare::node {
namespace {

using gpushare::fakes::FakeKubelet;
using gpushare::testing::GpuUuid;
using gpushare::testing::LogCapture;
using gpushare::testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kWait = 10s;           // a liveness bound for real I/O over the unix sockets
constexpr int64_t kPromiseMs = 2000;  // re-registration after kubelet restarts (simulated time)
constexpr int64_t kPollCheckMs = deviceplugin::PluginLifecycle::kPollCheckMs;

bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

Inventory TwoGpus() {
  Inventory inv;
  inv.source = "test";
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = GpuUuid(i);
    g.product = "NVIDIA A10";
    g.memory_mib = 24576;
    g.cc_major = 8;
    g.cc_minor = 6;
    g.numa_node = 0;
    inv.gpus.push_back(g);
  }
  return inv;
}

NodeConfig Replicated(int replicas) {
  NodeConfig c;
  ReplicatedResource r;
  r.name = "nvidia.com/gpu";
  r.replicas = replicas;
  r.field_path = "sharing.timeSlicing.resources[0]";
  c.time_slicing.resources.push_back(r);
  c.gpushare.health_recovery_seconds = 1;
  return c;
}

// A feed whose sink the test drives.
struct TestFeed : HealthFeed {
  explicit TestFeed(HealthSink s, std::mutex* mu, HealthSink* slot) : mu_(mu), slot_(slot) {
    std::lock_guard<std::mutex> lock(*mu_);
    *slot_ = std::move(s);
  }
  ~TestFeed() override {
    std::lock_guard<std::mutex> lock(*mu_);
    *slot_ = nullptr;
  }
  std::mutex* mu_;
  HealthSink* slot_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubelet_ = std::make_unique<FakeKubelet>(gpushare::fakes::FakeKubeletOptions{dir_.path()});
  }
  void TearDown() override {
    if (agent_) agent_->RequestStop();
    if (runner_.joinable()) runner_.join();
  }

  void StartAgent() {
    AgentOptions o;
    o.plugin_dir = dir_.path();
    o.handle_signals = false;
    o.min_backoff = min_backoff_;
    o.max_backoff = max_backoff_;
    o.watch_plugin_dir = watch_;
    o.clock = clock_;
    o.observers = observers_;
    o.allocate_observers = allocate_observers_;
    o.on_load = [this](bool accepted) { (accepted ? accepted_ : rejected_)++; };
    o.load = [this]() -> Result<AgentInputs> {
      std::lock_guard<std::mutex> lock(mu_);
      if (!next_error_.empty()) return Status::InvalidArgument(next_error_);
      return AgentInputs{inventory_, config_, {}};
    };
    o.health = [this](const AgentInputs&, HealthSink sink) -> Result<std::unique_ptr<HealthFeed>> {
      feeds_created_++;
      return std::unique_ptr<HealthFeed>(new TestFeed(std::move(sink), &sink_mu_, &sink_));
    };
    agent_ = std::make_unique<Agent>(std::move(o));
    Status s = agent_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    runner_ = std::thread([this] { exit_code_ = agent_->Run(); });
  }

  // Moves the simulated time on, 10 ms at a time, until `done`; false when it is not done
  // within `max_sim_ms` of simulated time or kWait of real time (the agent's I/O between the
  // steps takes what it takes).
  bool AdvanceUntil(const std::function<bool()>& done, int64_t max_sim_ms = 60000) {
    const auto give_up = std::chrono::steady_clock::now() + kWait;
    const int64_t until = clock_->NowMs() + max_sim_ms;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up || clock_->NowMs() >= until) return false;
      clock_->Advance(10);
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  bool AdvanceUntilAllocatable(int64_t n, int registrations = 1, int64_t max_sim_ms = 60000) {
    return AdvanceUntil(
        [&] {
          auto r = kubelet_->Resource("nvidia.com/gpu");
          return r && r->connected && r->allocatable == n && r->registrations >= registrations;
        },
        max_sim_ms);
  }
  // Lets simulated time pass in which nothing should happen, with the agent given real time
  // to do it anyway (a negative check).
  void Idle(int64_t sim_ms) {
    for (int64_t t = 0; t < sim_ms; t += 50) {
      clock_->Advance(50);
      std::this_thread::sleep_for(5ms);
    }
  }
  int Registrations() { return kubelet_->Resource("nvidia.com/gpu")->registrations; }

  void Inject(const std::string& uuid, uint32_t xid) {
    ASSERT_TRUE(kubelet_->WaitFor(
        [&] {
          std::lock_guard<std::mutex> lock(sink_mu_);
          return static_cast<bool>(sink_);
        },
        kWait));
    std::lock_guard<std::mutex> lock(sink_mu_);
    HealthEvent ev;
    ev.uuid = uuid;
    ev.xid = xid;
    sink_(ev);
  }

  TempDir dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::mutex mu_;
  Inventory inventory_ = TwoGpus();
  NodeConfig config_ = Replicated(4);
  std::string next_error_;
  std::mutex sink_mu_;
  HealthSink sink_;
  std::atomic<int> feeds_created_{0};
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
  std::atomic<int> exit_code_{-1};
  std::shared_ptr<SimulatedClock> clock_ = std::make_shared<SimulatedClock>();
  std::atomic<int> accepted_{0}, rejected_{0};
  bool watch_ = true;
  std::vector<std::shared_ptr<AgentObserver>> observers_;
  std::vector<std::shared_ptr<deviceplugin::AllocateObserver>> allocate_observers_;
  std::chrono::milliseconds min_backoff_ = 50ms, max_backoff_ = 500ms;
};

TEST_F(AgentTest, RegistersThePlanAndRemovesSocketsOnStop) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  std::string sock = dir_.Sub(kubelet_->Resource("nvidia.com/gpu")->endpoint);
  EXPECT_TRUE(Exists(sock));
  agent_->RequestStop();
  runner_.join();
  EXPECT_EQ(exit_code_.load(), 0);
  EXPECT_FALSE(Exists(sock));
  EXPECT_TRUE(Exists(kubelet_->kubelet_socket())) << "never touches kubelet's socket";
}

// Every observer in AgentOptions::observers hears every plan and registration, in order; every
// one in allocate_observers hears every container request of every served resource, answered
// or refused with its code: one fan-out, registered in one place.
TEST_F(AgentTest, EveryObserverHearsThePlansAndEveryAllocate) {
  struct Heard : AgentObserver, deviceplugin::AllocateObserver {
    Heard(std::mutex* mu, std::vector<std::string>* log, std::string name)
        : mu(mu), log(log), name(std::move(name)) {}
    void PlanChanged(const AgentInputs&, const ResourcePlan& plan) override {
      Add("plan " + std::to_string(plan.resources.size()));
    }
    void Registered(const std::string& resource) override { Add("registered " + resource); }
    void OnAllocate(const deviceplugin::AllocateOutcome& o) override {
      Add(std::string(o.resource) + " " + (o.answered() ? "answered" : std::string(o.reason)));
    }
    void Add(const std::string& what) {
      std::lock_guard<std::mutex> l(*mu);
      log->push_back(name + ": " + what);
    }
    std::mutex* mu;
    std::vector<std::string>* log;
    std::string name;
  };
  std::mutex mu;
  std::vector<std::string> log;
  auto a = std::make_shared<Heard>(&mu, &log, "a");
  auto b = std::make_shared<Heard>(&mu, &log, "b");
  observers_ = {a, b};
  allocate_observers_ = {a, b};
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return log.size() >= 4;
      },
      kWait));
  for (const std::string& id : {GpuUuid(0) + "::0", std::string("GPU-bogus::0")}) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    kubelet_->RawAllocate("nvidia.com/gpu", req, &resp);
  }
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(log, (std::vector<std::string>{
                     "a: plan 1", "b: plan 1", "a: registered nvidia.com/gpu",
                     "b: registered nvidia.com/gpu", "a: nvidia.com/gpu answered",
                     "b: nvidia.com/gpu answered", "a: nvidia.com/gpu UnknownDevice",
                     "b: nvidia.com/gpu UnknownDevice"}));
}

TEST_F(AgentTest, RegistersWhenKubeletComesLater) {
  StartAgent();
  Idle(400);  // a few failed attempts, backing off (no kubelet.sock yet)
  ASSERT_TRUE(kubelet_->Start().ok());
  // kubelet.sock appearing is a kubelet start: served again after the debounce, registered.
  ASSERT_TRUE(AdvanceUntilAllocatable(8));
}

TEST_F(AgentTest, ReRegistersAfterKubeletRestarts) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  for (int round = 2; round <= 4; ++round) {
    ASSERT_TRUE(kubelet_->Restart().ok());
    ASSERT_TRUE(AdvanceUntilAllocatable(8, round, kPromiseMs)) << "round " << round;
  }
  Idle(300);
  EXPECT_LE(Registrations(), 4 + 3)
      << "at most one extra registration per restart (socket deletion seen before kubelet.sock)";
  int before = Registrations();
  Idle(1000);
  EXPECT_EQ(Registrations(), before) << "settled: no restart loop";
}

TEST_F(AgentTest, ReRegistersAfterDroppedStream) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  ASSERT_TRUE(
      kubelet_->WaitFor([&] { return kubelet_->Resource("nvidia.com/gpu")->stream_open; }, kWait));
  ASSERT_TRUE(kubelet_->DropStream("nvidia.com/gpu"));
  ASSERT_TRUE(AdvanceUntilAllocatable(8, 2));
  // Exactly one re-registration: our own socket churn must not feed back into restarts.
  Idle(1000);
  EXPECT_EQ(Registrations(), 2);
}

TEST_F(AgentTest, SocketDeletedWhileKubeletRunsIsServedAgain) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  std::string sock = dir_.Sub(kubelet_->Resource("nvidia.com/gpu")->endpoint);
  ::unlink(sock.c_str());
  // Only the watch tells: the stream stays open and the check by state is 10 s away.
  ASSERT_TRUE(AdvanceUntilAllocatable(8, 2, kPromiseMs));
  EXPECT_TRUE(Exists(sock));
}

// Without inotify (a file system without it; the instance limit reached) the check of the
// files every second finds what the watch would have reported, within the 2 s promise.
TEST_F(AgentTest, WithoutInotifyTheCheckEverySecondFindsALostSocket) {
  watch_ = false;
  LogCapture log;
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  EXPECT_EQ(log.Count("event=watch_unavailable"), 1u) << log.Text();
  std::string sock = dir_.Sub(kubelet_->Resource("nvidia.com/gpu")->endpoint);
  ::unlink(sock.c_str());
  // Nothing notices before the check is due (the start checked at the time it still shows).
  Idle(kPollCheckMs - 100);
  EXPECT_EQ(Registrations(), 1);
  EXPECT_FALSE(Exists(sock));
  ASSERT_TRUE(AdvanceUntilAllocatable(8, 2, kPromiseMs));
  EXPECT_TRUE(Exists(sock));
}

TEST_F(AgentTest, WithoutInotifyAKubeletRestartIsFoundWithinThePromise) {
  watch_ = false;
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  for (int round = 2; round <= 3; ++round) {
    ASSERT_TRUE(kubelet_->Restart().ok());
    ASSERT_TRUE(AdvanceUntilAllocatable(8, round, kPromiseMs)) << "round " << round;
  }
}

// Kubelet gone: registrations are retried with a backoff that doubles (the agent's default
// 200 ms to 5 s), not in a busy loop; kubelet's return ends the wait (kubelet.sock created).
TEST_F(AgentTest, KubeletGoneMeansBackoffNotABusyLoop) {
  min_backoff_ = AgentOptions{}.min_backoff;
  max_backoff_ = AgentOptions{}.max_backoff;
  LogCapture log;
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  kubelet_->Stop();  // the stream ends, kubelet.sock disappears
  ASSERT_TRUE(AdvanceUntil([&] { return log.Count("event=register_failed") >= 1; }, kPromiseMs))
      << log.Text();
  Idle(1500);
  // Backoff 200, 400, 800 ms...: a handful of attempts, not one every few milliseconds.
  EXPECT_GE(log.Count("event=register_failed"), 2u) << "retried";
  EXPECT_LE(log.Count("event=register_failed"), 6u) << log.Text();
  EXPECT_LE(log.Count("event=serve "), 3u) << log.Text();
  ASSERT_TRUE(kubelet_->Start().ok());
  ASSERT_TRUE(AdvanceUntilAllocatable(8, 2, kPromiseMs)) << "the wait for a retry ends at once";
}

TEST_F(AgentTest, XidMakesGpuUnhealthyAndItRecovers) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  Inject(GpuUuid(1), 13);  // ignored by default: nothing changes
  Inject(GpuUuid(1), 79);
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  auto r = kubelet_->Resource("nvidia.com/gpu");
  for (const auto& d : r->devices) {
    EXPECT_EQ(d.health == "Healthy", d.id.rfind(GpuUuid(0), 0) == 0) << d.id;
  }
  // A Unhealthy device is not admitted: the four healthy ones are all there is.
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(kubelet_->Admit("p" + std::to_string(i) + "/c", "nvidia.com/gpu", 1).admitted);
  EXPECT_FALSE(kubelet_->Admit("p9/c", "nvidia.com/gpu", 1).admitted);
  // The clock stands still: no recovery, however long the agent runs.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(kubelet_->Resource("nvidia.com/gpu")->allocatable, 4);
  // Just before the quiet period (1 s in this config) ends: still Unhealthy; after it: Healthy.
  clock_->Advance(990);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(kubelet_->Resource("nvidia.com/gpu")->allocatable, 4);
  ASSERT_TRUE(AdvanceUntilAllocatable(8));
}

TEST_F(AgentTest, ReloadWithBadConfigKeepsServing) {
  ASSERT_TRUE(kubelet_->Start().ok());
  StartAgent();
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 8, kWait));
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_error_ = "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60";
  }
  agent_->RequestReload();
  ASSERT_TRUE(kubelet_->WaitFor([&] { return rejected_.load() == 1; }, kWait));
  Idle(500);
  auto r = kubelet_->Resource("nvidia.com/gpu");
  EXPECT_TRUE(r->connected);
  EXPECT_EQ(r->allocatable, 8);
  EXPECT_EQ(r->registrations, 1) << "a rejected reload changes nothing";
  // A good reload with a new replica count is served.
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_error_.clear();
    config_ = Replicated(10);
  }
  agent_->RequestReload();
  ASSERT_TRUE(kubelet_->WaitFor([&] { return accepted_.load() == 2; }, kWait));
  // The old server had its stream open: the new one is served only after the settle.
  ASSERT_TRUE(AdvanceUntilAllocatable(20, 2));
  EXPECT_EQ(feeds_created_.load(), 1) << "same GPUs: the health feed keeps running";
  // Health events still reach the new plan's servers.
  Inject(GpuUuid(0), 79);
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 10, kWait));
}

}  // namespace
}  // namespace gpushare::node
