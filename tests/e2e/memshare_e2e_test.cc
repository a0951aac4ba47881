// Memory shares end to end: the REAL gpushare-scheduler (driven by the kube-scheduler double)
// and the REAL gpushare-node, cooperating only through the fake-apiserver binary, with the
// kubelet double admitting what gets bound. (a) the seed Knative Service at 100 pods on 1 node
// x 8 GPUs x 24 GiB; (b) GPUs of different sizes; (c) identical pods admitted in the opposite
// order from binding; (d) the scheduler restarted in the middle of a burst; (e) the agent
// restarted; (f) bad requests to both binaries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <iostream>
#include <thread>

#include "tests/e2e/memshare_env.h"
#include "tests/fakes/scheduler/fake_kube_scheduler.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::e2e {
namespace {

using fakes::ExtenderConfig;
using fakes::FakeKubeScheduler;
using fakes::ScheduleResult;
using kube::testing::WaitWhileProgressing;
using scheduler::testing::KnativePod;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SeedManifestPath;
using scheduler::testing::SimplePod;
using ::testing::HasSubstr;

// kubelet's pod workers, reduced to admission: pods bound to the node are admitted as they
// appear (in the API's order, which is not the binding order), one at a time.
class KubeletLoop {
 public:
  // With a seed, each round admits the pods it found in a random order (kubelet's pod workers
  // start in the order its watch delivers pods, and admission order is not the binding order).
  explicit KubeletLoop(MemShareEnv* env, uint64_t seed = 0)
      : env_(env), shuffle_(seed != 0), rng_(seed), thread_([this] { Run(); }) {}
  ~KubeletLoop() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void Pause() {
    paused_ = true;
    while (busy_) std::this_thread::yield();
  }
  void Resume() { paused_ = false; }
  int admitted() const { return admitted_; }
  int rejected() const { return rejected_; }
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> l(mu_);
    return errors_;
  }

 private:
  void Run() {
    kube::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + env_->spec().name;
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      busy_ = true;  // before looking at paused_: Pause() waits for it
      if (paused_) {
        busy_ = false;
        continue;
      }
      Result<std::vector<kube::Pod>> listed = env_->api()->ListPods("", lo);
      std::vector<kube::Pod> pods = listed.value_or({});
      if (shuffle_) {
        for (size_t i = pods.size(); i > 1; --i) std::swap(pods[i - 1], pods[rng_.Uniform(i)]);
      }
      for (const kube::Pod& p : pods) {
        if (stop_ || paused_) break;
        if (done_.count(p.metadata.uid) || p.status.phase != "Pending") continue;
        done_.insert(p.metadata.uid);
        fakes::PodAdmission a = env_->Admit(p.metadata.namespace_, p.metadata.name);
        if (a.admitted) {
          ++admitted_;
        } else {
          ++rejected_;
          std::lock_guard<std::mutex> l(mu_);
          errors_.push_back(p.metadata.name + ": " + a.error);
        }
        env_->UnitsPerGpu();  // no GPU ever holds more than its memory
      }
      busy_ = false;
    }
  }

  MemShareEnv* env_;
  const bool shuffle_;
  placement::Rng rng_;
  std::atomic<bool> stop_{false}, paused_{false}, busy_{false};
  std::atomic<int> admitted_{0}, rejected_{0};
  std::set<std::string> done_;
  std::mutex mu_;
  std::vector<std::string> errors_;
  std::thread thread_;  // last
};

// What kubelet has answered so far: the progress its waits follow (kube::testing::
// WaitWhileProgressing: slow admissions on a loaded machine are waited for, a stall is not).
uint64_t Answered(const KubeletLoop& k) {
  return static_cast<uint64_t>(k.admitted() + k.rejected());
}

class MemShareE2E : public ::testing::Test {
 protected:
  void Begin(NodeSpec spec = {}) {
    env_ = std::make_unique<MemShareEnv>(std::move(spec));
    env_->Start();
    StartScheduler();
  }
  void StartScheduler(int port = 0, const std::vector<std::string>& extra = {}) {
    scheduler_ = std::make_unique<SchedulerProcess>(env_->dir(), env_->kubeconfig(), port, extra);
    ASSERT_TRUE(scheduler_->ok()) << "gpushare-scheduler did not start";
    ASSERT_TRUE(scheduler_->WaitReady());
  }
  void TearDown() override {
    if (HasFailure() && env_)
      std::cerr << "---- agent log (tail) ----\n" << Tail(env_->AgentLog()) << "\n";
  }
  static std::string Tail(const std::string& s) {
    return s.size() > 6000 ? s.substr(s.size() - 6000) : s;
  }

  // The extender entry as deploy/kube-scheduler-config.yaml has it (ignoredByScheduler false:
  // kube-scheduler also checks the node's allocatable aliyun.com/gpu-mem).
  // With ignored_by_scheduler the extender alone decides.
  ExtenderConfig Extender(bool ignored_by_scheduler = false) const {
    ExtenderConfig c;
    c.url_prefix = scheduler_->url_prefix();
    c.managed_resources = {{kMem, ignored_by_scheduler}};
    c.http_timeout = std::chrono::seconds(10);
    return c;
  }

  void AddPod(const json& pod) {
    Result<json> r =
        env_->api()->Create(kube::kPods, pod["metadata"].value("namespace", "default"), pod);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // kube-scheduler's view of a failed attempt: PodScheduled False, Unschedulable, the message.
  void MarkUnschedulable(const std::string& ns, const std::string& name,
                         const std::string& message) {
    json status = {{"conditions",
                    {{{"type", "PodScheduled"},
                      {"status", "False"},
                      {"reason", "Unschedulable"},
                      {"message", message}}}}};
    ASSERT_TRUE(env_->api()->PatchPodStatus(ns, name, status).ok());
  }

  // Usage per GPU as the scheduler must count it: every bound pod's annotations (confirmed or
  // assumed), each within the GPU's size.
  std::map<int, std::pair<int64_t, int>> AnnotatedUsage() {
    std::map<int, std::pair<int64_t, int>> use;
    for (const kube::Pod& p : env_->api()->ListPods("").value_or({})) {
      if (p.spec.node_name.empty() || p.IsTerminal()) continue;
      ms::PodRequest req = *kube::PodMemRequest(p);
      if (req.empty()) continue;
      ms::PodAssignment a = ms::ResolveAssignment(p.metadata.annotations, req);
      EXPECT_NE(a.state, ms::AssignmentState::kNone) << p.metadata.name;
      for (const auto& [g, u] : ms::GpuUsage(req, a.gpus)) {
        use[g].first += u.units;
        use[g].second += u.clients;
      }
    }
    for (const auto& [g, u] : use) {
      EXPECT_LE(u.first, static_cast<int64_t>(env_->spec().gpu_mib.at(g) / 1024))
          << "GPU " << g << " over-committed";
    }
    return use;
  }

  // Schedules `names` in order; returns the unschedulable ones' messages by name.
  std::map<std::string, std::string> ScheduleAll(FakeKubeScheduler& sched, const std::string& ns,
                                                 const std::vector<std::string>& names,
                                                 int* bound) {
    std::map<std::string, std::string> pending;
    for (const std::string& n : names) {
      ScheduleResult r = sched.ScheduleOne(ns, n);
      EXPECT_NE(r.kind, ScheduleResult::Kind::kError) << n << ": " << r.message;
      if (r.bound()) {
        ++*bound;
      } else if (r.kind == ScheduleResult::Kind::kUnschedulable) {
        pending[n] = r.message;
        MarkUnschedulable(ns, n, r.message);
      }
    }
    return pending;
  }

  void ExpectEveryAllocateAnswer() {
    for (const fakes::AllocationRecord& r : env_->kubelet().Allocations()) {
      if (r.resource == kMem && !r.init) env_->ExpectAllocateAnswer(r);
    }
  }

  std::unique_ptr<MemShareEnv> env_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

// (a) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, SeedKnativeServiceAt100PodsOn8GpusOf24GiB) {
  scheduler::testing::SeedService seed;
  if (!scheduler::testing::ReadSeedService(&seed))
    GTEST_SKIP() << "SKIPPED: " << SeedManifestPath() << " absent";
  ASSERT_EQ(seed.units, 3);
  ASSERT_EQ(seed.max_scale, 100);
  Begin();
  std::vector<std::string> names;
  for (int i = 0; i < seed.max_scale; ++i) {
    json pod = KnativePod(seed.service, seed.ns, i, seed.container, seed.image, seed.units);
    names.push_back(pod["metadata"]["name"]);
    AddPod(pod);
  }
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 7});
  ASSERT_TRUE(sched.Validate().ok());
  KubeletLoop kubelet(env_.get());
  int bound = 0;
  std::map<std::string, std::string> pending;
  // Knative scales out one request at a time: pods arrive while earlier ones are admitted.
  for (size_t i = 0; i < names.size(); i += 10) {
    std::vector<std::string> batch(names.begin() + i,
                                   names.begin() + std::min(names.size(), i + 10));
    for (auto& [n, m] : ScheduleAll(sched, seed.ns, batch, &bound)) pending[n] = m;
    AnnotatedUsage();
  }
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= 64; },
                                   [&] { return Answered(kubelet); }));
  kubelet.Stop();
  EXPECT_EQ(kubelet.rejected(), 0) << kubelet.errors().front();
  EXPECT_EQ(bound, 64);
  ASSERT_EQ(pending.size(), 36u);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();

  // 64 run, 8 per GPU, 24 GiB each; the API, kubelet and Allocate agree.
  int running = 0;
  for (const kube::Pod& p : env_->api()->ListPods(seed.ns).value_or({})) {
    if (p.status.phase == "Running") {
      ++running;
      EXPECT_EQ(p.metadata.annotations.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "true");
      continue;
    }
    EXPECT_EQ(p.status.phase, "Pending") << p.metadata.name;
    EXPECT_TRUE(p.spec.node_name.empty()) << p.metadata.name;
    const kube::Condition* c = p.FindCondition("PodScheduled");
    ASSERT_NE(c, nullptr) << p.metadata.name;
    EXPECT_EQ(c->reason, "Unschedulable");
    EXPECT_THAT(c->message, HasSubstr("0/1 nodes are available: 1 "));
    EXPECT_THAT(c->message, HasSubstr("aliyun.com/gpu-mem")) << c->message;
  }
  EXPECT_EQ(running, 64);
  std::map<int, int64_t> per_gpu = env_->UnitsPerGpu();
  ASSERT_EQ(per_gpu.size(), 8u);
  for (const auto& [g, n] : per_gpu) EXPECT_EQ(n, 24) << "GPU " << g;
  auto use = AnnotatedUsage();
  for (const auto& [g, u] : use) {
    EXPECT_EQ(u.first, 24) << "GPU " << g;
    EXPECT_EQ(u.second, 8) << "GPU " << g;
  }
  ExpectEveryAllocateAnswer();
  // queue-proxy never reaches the device plugin; user-container does, once per pod.
  for (const fakes::AllocationRecord& r : env_->kubelet().Allocations())
    EXPECT_EQ(r.container, seed.container);
  // The kubelet's PodResources view is what the agent read (List, not a guess).
  EXPECT_GT(env_->kubelet().pod_resources_calls(), 0u);
  const std::string log = env_->AgentLog();
  std::cout << "[ stats    ] steered to the planned GPU: "
            << MemShareEnv::Count(log, "reason=planned ")
            << ", corrected by the reconciler: " << MemShareEnv::Count(log, "corrected=true")
            << ", PodResources List calls: " << env_->kubelet().pod_resources_calls()
            << " (rate-limited: " << env_->kubelet().pod_resources_rate_limited() << ")\n";
}

// (b) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, GpusOfDifferentSizes) {
  NodeSpec spec;
  spec.gpu_mib = {16160, 24576, 40960};  // 15, 24 and 40 GiB
  Begin(spec);
  std::vector<std::string> names;
  for (int i = 0; i < 9; ++i) {
    names.push_back("m" + std::to_string(i));
    AddPod(SimplePod(names.back(), 10));
  }
  FakeKubeScheduler sched(env_->api(), {{Extender(/*ignored_by_scheduler=*/true)}, 3});
  int bound = 0;
  auto pending = ScheduleAll(sched, "default", names, &bound);
  EXPECT_EQ(bound, 1 + 2 + 4);  // 79 units on the node, but a share never spans GPUs
  for (const auto& [n, m] : pending) EXPECT_THAT(m, HasSubstr("no GPU has 10 GiB free")) << n;
  KubeletLoop kubelet(env_.get());
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= bound; },
                                   [&] { return Answered(kubelet); }));
  kubelet.Stop();
  EXPECT_EQ(kubelet.rejected(), 0);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  EXPECT_EQ(env_->UnitsPerGpu(), (std::map<int, int64_t>{{0, 10}, {1, 20}, {2, 40}}));
  ExpectEveryAllocateAnswer();  // ALIYUN_COM_GPU_MEM_DEV is each GPU's own size
  for (const kube::Pod& p : env_->api()->ListPods("default").value_or({})) {
    if (p.status.phase != "Running") continue;
    const int g = std::stoi(p.metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"));
    EXPECT_EQ(p.metadata.annotations.at("ALIYUN_COM_GPU_MEM_DEV"),
              std::to_string(std::vector<int>{15, 24, 40}[g]));
  }
  // A 5 GiB pod still fits on the 15 GiB GPU only.
  AddPod(SimplePod("small", 5));
  ScheduleResult r = sched.ScheduleOne("default", "small");
  ASSERT_TRUE(r.bound()) << r.message;
  ASSERT_TRUE(env_->Admit("default", "small").admitted);
  ASSERT_TRUE(env_->WaitTruthful());
  EXPECT_EQ(env_->KubeletTruth()["default/small"]["main"], 0);
}

// (c) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, IdenticalPodsAdmittedInTheOppositeOrderFromBinding) {
  Begin();
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i) {
    names.push_back("twin-" + std::to_string(i));
    AddPod(SimplePod(names.back(), 3));
  }
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 11});
  int bound = 0;
  EXPECT_TRUE(ScheduleAll(sched, "default", names, &bound).empty());
  ASSERT_EQ(bound, 16);
  std::map<std::string, std::string> assumed;
  for (const std::string& n : names)
    assumed[n] =
        env_->api()->GetPod("default", n)->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX");
  for (auto it = names.rbegin(); it != names.rend(); ++it)
    ASSERT_TRUE(env_->Admit("default", *it).admitted);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  int moved = 0;
  for (const std::string& n : names) {
    moved += env_->api()->GetPod("default", n)->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX") !=
             assumed[n];
  }
  EXPECT_GT(moved, 0) << "the reverse order should have swapped some pods";
  EXPECT_THAT(env_->AgentLog(), HasSubstr("corrected=true"));
  // The scheduler counts the truth: the remaining 48 pods fit exactly, the 65th does not.
  std::vector<std::string> more;
  for (int i = 0; i < 49; ++i) {
    more.push_back("more-" + std::to_string(i));
    AddPod(SimplePod(more.back(), 3));
  }
  KubeletLoop kubelet(env_.get());
  auto pending = ScheduleAll(sched, "default", more, &bound);
  EXPECT_EQ(bound, 64);
  EXPECT_EQ(pending.size(), 1u);
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= 48; },
                                   [&] { return Answered(kubelet); }));
  kubelet.Stop();
  EXPECT_EQ(kubelet.rejected(), 0) << kubelet.errors().front();
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  for (const auto& [g, n] : env_->UnitsPerGpu()) EXPECT_EQ(n, 24) << "GPU " << g;
}

// (d) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, SchedulerRestartedInTheMiddleOfABurst) {
  Begin();
  const int port = scheduler_->port();
  std::deque<std::string> queue;
  for (int i = 0; i < 80; ++i) {
    queue.push_back("burst-" + std::to_string(i));
    AddPod(SimplePod(queue.back(), 3));
  }
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 5});
  KubeletLoop kubelet(env_.get());
  int bound = 0, errors = 0;
  bool restarted = false;
  std::vector<std::string> unschedulable;
  // kube-scheduler's queue: unschedulable pods come back on cluster events (here: once the
  // pass is over and the node has admitted and confirmed what was bound).
  for (int pass = 0; pass < 5 && !queue.empty(); ++pass) {
    while (!queue.empty()) {
      if (bound == 30 &&
          !restarted) {  // SIGKILL: nothing is flushed, the new one rebuilds from the API
        restarted = true;
        scheduler_->Kill();
        scheduler_ = std::make_unique<SchedulerProcess>(env_->dir(), env_->kubeconfig(), port);
      }
      const std::string n = queue.front();
      queue.pop_front();
      // A bind the killed process had sent may land after kube-scheduler gave up on it; a
      // bound pod leaves kube-scheduler's queue.
      Result<kube::Pod> now = env_->api()->GetPod("default", n);
      if (now.ok() && !now->spec.node_name.empty()) {
        ++bound;
        continue;
      }
      ScheduleResult r = sched.ScheduleOne("default", n);
      if (r.bound()) {
        ++bound;
      } else if (r.kind == ScheduleResult::Kind::kUnschedulable) {
        unschedulable.push_back(n);
      } else {
        ++errors;  // not ready yet: kube-scheduler retries with back-off
        queue.push_back(n);
        ASSERT_LT(errors, 5000) << r.message;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    ASSERT_TRUE(
        WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= bound; },
                             [&] { return Answered(kubelet); }));
    ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
    if (bound == 64) break;
    queue.insert(queue.end(), unschedulable.begin(), unschedulable.end());
    unschedulable.clear();
  }
  EXPECT_TRUE(restarted);
  EXPECT_EQ(bound, 64);
  EXPECT_EQ(unschedulable.size() + queue.size(), 16u);
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= 64; },
                                   [&] { return Answered(kubelet); }));
  kubelet.Stop();
  EXPECT_EQ(kubelet.rejected(), 0) << kubelet.errors().front();
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  for (const auto& [g, u] : AnnotatedUsage()) EXPECT_EQ(u.first, 24) << "GPU " << g;
  for (const auto& [g, n] : env_->UnitsPerGpu()) EXPECT_EQ(n, 24) << "GPU " << g;
}

// (e) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, AgentRestartedAllocationsStayIntact) {
  Begin();
  std::vector<std::string> first, second;
  for (int i = 0; i < 40; ++i) {
    first.push_back("e-" + std::to_string(i));
    AddPod(SimplePod(first.back(), 3));
  }
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 9});
  KubeletLoop kubelet(env_.get());
  int bound = 0;
  ScheduleAll(sched, "default", first, &bound);
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() >= 40; },
                                   [&] { return Answered(kubelet); }));
  // The agent dies (SIGKILL); while it is away kubelet admits nothing new for the resource.
  kubelet.Pause();
  env_->StopAgent(SIGKILL);
  const auto before = env_->kubelet().Allocations();
  for (int i = 0; i < 30; ++i) {
    second.push_back("f-" + std::to_string(i));
    AddPod(SimplePod(second.back(), 3));
  }
  ScheduleAll(sched, "default", second, &bound);  // binding goes on: the scheduler needs no agent
  EXPECT_EQ(bound, 64);
  env_->StartAgent();
  env_->WaitServing();
  kubelet.Resume();
  ASSERT_TRUE(WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= 64; },
                                   [&] { return Answered(kubelet); }));
  kubelet.Stop();
  EXPECT_EQ(kubelet.rejected(), 0) << kubelet.errors().front();
  const auto after = env_->kubelet().Allocations();
  for (const auto& b : before) {
    bool same = false;
    for (const auto& a : after)
      same = same ||
             (a.pod_uid == b.pod_uid && a.container == b.container && a.device_ids == b.device_ids);
    EXPECT_TRUE(same) << b.pod_name << " lost or changed its units";
  }
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  for (const auto& [g, n] : env_->UnitsPerGpu()) EXPECT_EQ(n, 24) << "GPU " << g;
  ExpectEveryAllocateAnswer();
}

// (g) -------------------------------------------------------------------------------------------
// The adversarial burst: the seed's 3 GiB pods, 100 of them, onto 8 GPUs of 22 GiB (7 pods
// each, 56 in all, 1 GiB left over per GPU), with kube-scheduler's asynchronous binds (4 in
// flight, random delays, so Bindings land in another order than the scheduling cycles ran),
// kubelet admitting in a random order, and, in half the runs, the scheduler killed and the
// agent killed and restarted in the middle. No pod may be refused at admission; no GPU may
// hold more than its memory; once everything settled, exactly 56 pods run and the rest are
// Pending with the extender's reason. Runs: $GPUSHARE_BURST_RUNS (default 2) of each, seeds 1..N
// (1001.. with restarts) (or $GPUSHARE_BURST_SEED for one); docs/reliability.md has the 50-run
// figures.
class ConcurrentBindBurst : public MemShareE2E, public ::testing::WithParamInterface<bool> {
 protected:
  struct Outcome {
    int bound = 0, unschedulable = 0, bind_errors = 0, admitted = 0, rejected = 0, corrected = 0;
    std::vector<std::string> errors;
  };

  Outcome Run(uint64_t seed, bool restarts) {
    Outcome out;
    NodeSpec spec;
    spec.gpu_mib = std::vector<uint64_t>(8, 22u * 1024);
    Begin(spec);
    if (HasFatalFailure()) return out;
    const int port = scheduler_->port();
    std::deque<std::string> queue;
    for (int i = 0; i < 100; ++i) {
      queue.push_back("burst-" + std::to_string(i));
      AddPod(SimplePod(queue.back(), 3));
    }
    fakes::SchedulerOptions so{{Extender()}, seed};
    so.max_binds_in_flight = 4;
    so.bind_jitter = std::chrono::microseconds(3000);
    FakeKubeScheduler sched(env_->api(), so);
    KubeletLoop kubelet(env_.get(), seed);
    placement::Rng rng(seed * 7919);
    const int kill_scheduler_at = restarts ? 10 + static_cast<int>(rng.Uniform(40)) : -1;
    const int restart_agent_at = restarts ? 10 + static_cast<int>(rng.Uniform(40)) : -1;
    std::mutex mu;
    std::deque<std::string> retry;
    std::set<std::string> unschedulable;
    int cycles = 0;
    auto done = [&](const std::string& name) {
      return [&, name](const ScheduleResult& r) {
        std::lock_guard<std::mutex> l(mu);
        if (r.bound()) {
          ++out.bound;
        } else if (r.kind == ScheduleResult::Kind::kUnschedulable) {
          unschedulable.insert(name);
          MarkUnschedulable("default", name, r.message);
        } else {
          ++out.bind_errors;  // the extender was away or refused: kube-scheduler retries
          retry.push_back(name);
        }
      };
    };
    auto schedule_round = [&] {
      while (true) {
        std::string name;
        {
          std::lock_guard<std::mutex> l(mu);
          if (queue.empty()) std::swap(queue, retry);
          if (queue.empty()) break;
          name = queue.front();
          queue.pop_front();
        }
        ++cycles;
        if (cycles == kill_scheduler_at) {
          scheduler_->Kill();  // binds in flight fail or land; nothing is flushed
          scheduler_ = std::make_unique<SchedulerProcess>(env_->dir(), env_->kubeconfig(), port);
        }
        if (cycles == restart_agent_at) {
          kubelet.Pause();  // kubelet cannot admit for the resource while the plugin is away
          env_->StopAgent(SIGKILL);
          env_->StartAgent();
          env_->WaitServing();
          kubelet.Resume();
        }
        Result<json> pod = env_->api()->Get(kube::kPods, "default", name);
        if (!pod.ok()) continue;
        if (!(*pod)["spec"].value("nodeName", "").empty()) {  // a bind reported failed but landed
          std::lock_guard<std::mutex> l(mu);
          ++out.bound;
          continue;
        }
        sched.ScheduleAsync(*pod, done(name));
        if (out.bind_errors > 2000) break;  // cannot happen unless the scheduler never comes back
        std::this_thread::sleep_for(std::chrono::microseconds(rng.Uniform(2000)));
      }
    };
    auto schedule_pass = [&] {
      for (bool more = true; more;) {
        schedule_round();
        sched.WaitBinds();  // binds that failed meanwhile come back through `retry`
        std::lock_guard<std::mutex> l(mu);
        more = !retry.empty() && out.bind_errors <= 2000;
      }
    };
    schedule_pass();
    EXPECT_LE(out.bind_errors, 2000) << "gpushare-scheduler never came back";
    // Everything bound is admitted and confirmed; then kube-scheduler retries the
    // unschedulable pods (it does on cluster events): the count must come out exact.
    EXPECT_TRUE(
        WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= out.bound; },
                             [&] { return Answered(kubelet); }));
    EXPECT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
    {
      std::lock_guard<std::mutex> l(mu);
      for (const std::string& n : unschedulable) queue.push_back(n);
      unschedulable.clear();
    }
    schedule_pass();
    EXPECT_TRUE(
        WaitWhileProgressing([&] { return kubelet.admitted() + kubelet.rejected() >= out.bound; },
                             [&] { return Answered(kubelet); }));
    kubelet.Stop();
    out.admitted = kubelet.admitted();
    out.rejected = kubelet.rejected();
    out.errors = kubelet.errors();
    out.unschedulable = static_cast<int>(unschedulable.size());
    EXPECT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
    for (const auto& [g, n] : env_->UnitsPerGpu()) EXPECT_LE(n, 22) << "GPU " << g;
    AnnotatedUsage();
    out.corrected = static_cast<int>(MemShareEnv::Count(env_->AgentLog(), "corrected=true"));
    return out;
  }
};

TEST_P(ConcurrentBindBurst, NoPodRefusedAtAdmission) {
  const bool restarts = GetParam();
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("GPUSHARE_BURST_SEED")) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
  } else {
    const char* runs = std::getenv("GPUSHARE_BURST_RUNS");
    const int n = runs ? std::max(1, std::atoi(runs)) : 2;
    for (int i = 1; i <= n; ++i) seeds.push_back(static_cast<uint64_t>(i) + (restarts ? 1000 : 0));
  }
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed) + (restarts ? " with restarts" : ""));
    Outcome o = Run(seed, restarts);
    std::cout << "[ burst    ] seed=" << seed << " restarts=" << restarts << " bound=" << o.bound
              << " admitted=" << o.admitted << " refused=" << o.rejected
              << " unschedulable=" << o.unschedulable << " bind_errors=" << o.bind_errors
              << " corrected=" << o.corrected << "\n";
    EXPECT_EQ(o.rejected, 0) << (o.errors.empty() ? "" : o.errors.front());
    EXPECT_EQ(o.bound, 56);
    EXPECT_EQ(o.admitted, 56);
    EXPECT_EQ(o.unschedulable, 44);
    if (HasFailure()) return;
    scheduler_.reset();
    env_.reset();
  }
}

INSTANTIATE_TEST_SUITE_P(Binds, ConcurrentBindBurst, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "WithRestarts" : "NoRestarts";
                         });

// (h) -------------------------------------------------------------------------------------------
// A swapped pair, then one of them is deleted (Knative scaled down): the other sits where its
// partner was planned and its own planned slot is empty. gpushare-scheduler gives the slot back
// (the pod's plan moves to where it is) and the next pod gets it.
TEST_F(MemShareE2E, AnEmptyPlannedSlotLeftByADeletedSwapPartnerIsGivenBack) {
  NodeSpec spec;
  spec.gpu_mib = {4096, 4096};  // one 3 GiB pod per GPU
  env_ = std::make_unique<MemShareEnv>(spec);
  env_->Start();
  StartScheduler(0, {"--expiry-interval", "200ms"});
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 3});
  for (const char* n : {"a", "b"}) {
    AddPod(SimplePod(n, 3));
    ASSERT_TRUE(sched.ScheduleOne("default", n).bound());
  }
  const std::string b_planned =
      env_->api()->GetPod("default", "b")->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX");
  ASSERT_TRUE(env_->Admit("default", "b").admitted);  // b into a's slot
  ASSERT_TRUE(env_->Admit("default", "a").admitted);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  const std::string b_real =
      env_->api()->GetPod("default", "b")->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX");
  ASSERT_NE(b_real, b_planned) << "kubelet admitted b first: the pods swap";
  AddPod(SimplePod("c", 3));
  EXPECT_EQ(sched.ScheduleOne("default", "c").kind, ScheduleResult::Kind::kUnschedulable);
  ASSERT_TRUE(env_->api()->Delete(kube::kPods, "default", "a", {0, ""}).ok());
  ASSERT_TRUE(env_->kubelet().RemovePod("default", "a"));
  const std::string moved = "{\"main\":" + b_real + "}";
  ASSERT_TRUE(WaitUntil([&] {
    return env_->api()
               ->GetPod("default", "b")
               ->metadata.annotations.at(std::string(ms::kAssumedAnnotation)) == moved;
  })) << "b's plan should follow it";
  ScheduleResult r = sched.ScheduleOne("default", "c");
  ASSERT_TRUE(r.bound()) << r.message;
  ASSERT_TRUE(env_->Admit("default", "c").admitted);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  EXPECT_EQ(env_->KubeletTruth()["default/c"]["main"], std::stoi(b_planned));
}

// (f) -------------------------------------------------------------------------------------------
TEST_F(MemShareE2E, BadRequestsToBothBinaries) {
  NodeSpec spec;
  spec.gpu_mib = {24576, 24576};
  Begin(spec);
  // The scheduler: malformed, wrong-typed and oversized bodies get HTTP 400/413 with a reason.
  httplib::Client http("127.0.0.1", scheduler_->port());
  auto post = [&](const std::string& verb, const std::string& body) {
    httplib::Result r = http.Post("/gpushare-scheduler/" + verb, body, "application/json");
    return r ? r->status : 0;
  };
  EXPECT_EQ(post("filter", "{\"Pod\":"), 400);
  EXPECT_EQ(post("prioritize", "[1,2"), 400);
  EXPECT_EQ(post("bind", "{\"PodName\":7}"), 400);
  EXPECT_EQ(post("filter", std::string(9u << 20, ' ')), 413);
  // A pod larger than any GPU: refused with the sizes, and the node is never asked.
  AddPod(SimplePod("huge", 30));
  FakeKubeScheduler sched(env_->api(), {{Extender()}, 1});
  ScheduleResult r = sched.ScheduleOne("default", "huge");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_THAT(r.message, HasSubstr("30"));
  // A pod bound around the extender (no annotations): the node still gives it one GPU and
  // writes the truth, and the scheduler counts it from then on.
  json stray = SimplePod("stray", 20);
  stray["spec"]["nodeName"] = spec.name;
  AddPod(stray);
  ASSERT_TRUE(env_->Admit("default", "stray").admitted);
  ASSERT_TRUE(env_->WaitTruthful()) << env_->Untruthful().front();
  const int stray_gpu = env_->KubeletTruth()["default/stray"]["main"];
  // Once the scheduler has seen the confirmation, two 21 GiB containers no longer fit.
  fakes::ExtenderClient ext(Extender());
  json probe = scheduler::testing::PodJson("probe", {{"a", 21}, {"b", 21}});
  json node = *env_->api()->Get(kube::kNodes, "", spec.name);
  ASSERT_TRUE(WaitUntil([&] {
    Result<fakes::FilterOutcome> f = ext.Filter(probe, {node});
    return f.ok() && f->feasible.empty();
  }));
  AddPod(SimplePod("next", 10));
  r = sched.ScheduleOne("default", "next");
  ASSERT_TRUE(r.bound()) << r.message;
  ASSERT_TRUE(WaitUntil([&] {
    auto p = env_->api()->GetPod("default", "next");
    return p.ok() && p->metadata.annotations.count("ALIYUN_COM_GPU_MEM_IDX");
  }));
  EXPECT_NE(
      env_->api()->GetPod("default", "next")->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"),
      std::to_string(stray_gpu));
  // The node: units of two GPUs in one Allocate are refused with the reason.
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  c->add_devices_ids(GpuUuidFor(0) + "-_-1");
  c->add_devices_ids(GpuUuidFor(1) + "-_-1");
  v1beta1::AllocateResponse resp;
  grpc::Status s = env_->kubelet().RawAllocate(kMem, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("must come from one GPU"));
  EXPECT_TRUE(scheduler_->Running());
  EXPECT_TRUE(env_->agent()->Running());
}

}  // namespace
}  // namespace gpushare::e2e
