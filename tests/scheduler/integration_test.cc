// The real gpushare-scheduler binary against the real fake-apiserver binary, driven by the
// kube-scheduler double (tests/fakes/scheduler, written from the extender description):
// the seed Knative workload scaled to 100 pods, GPUs of different sizes, concurrent binds,
// restarts in the middle of a burst, and bad requests.
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <thread>

#include "core/memshare.h"
#include "kube/memshare_pod.h"
#include "tests/fakes/scheduler/fake_kube_scheduler.h"
#include "tests/scheduler/fixtures.h"
#include "tests/scheduler/processes.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using fakes::ExtenderClient;
using fakes::ExtenderConfig;
using fakes::FakeKubeScheduler;
using fakes::ScheduleResult;
using kube::testing::WaitUntil;
namespace ms = memshare;

class IntegrationTest : public ::testing::Test {
 public:
  void SetUp() override {
    api_ = std::make_unique<ApiServerProcess>(GPUSHARE_FAKE_APISERVER_BIN, tmp_.path());
    ASSERT_TRUE(api_->ok());
    client_ = kube::testing::MakeClient(api_->url(), {0, 1});
    kubeconfig_ = WriteKubeconfig(tmp_.path(), api_->url());
  }
  void StartScheduler(int port = 0, std::vector<std::string> extra = {}) {
    scheduler_ = std::make_unique<SchedulerProcess>(tmp_.path(), kubeconfig_, port, extra);
    ASSERT_TRUE(scheduler_->ok()) << "gpushare-scheduler did not start";
    ASSERT_TRUE(scheduler_->WaitReady());
  }
  ExtenderConfig Config(bool node_cache_capable = true, bool ignored_by_scheduler = false) const {
    ExtenderConfig c;
    c.url_prefix = scheduler_->url_prefix();
    c.weight = 1;
    c.node_cache_capable = node_cache_capable;
    c.managed_resources = {{"aliyun.com/gpu-mem", ignored_by_scheduler}};
    c.http_timeout = std::chrono::milliseconds(10000);
    return c;
  }
  // Creates the node; with the scheduler running, waits until its informer has brought the node
  // into the cache (a pod scheduled before that finds the node unknown: NodeUnknown).
  void AddNode(const json& node) {
    ASSERT_TRUE(client_->Create(kube::kNodes, "", node).ok());
    if (scheduler_ == nullptr) return;
    const std::string name = node["metadata"]["name"].get<std::string>();
    ASSERT_TRUE(
        scheduler_->WaitForLog("event=node_inventory node=" + name + " ", std::chrono::seconds(60)))
        << "gpushare-scheduler never saw node " << name;
  }
  void AddPod(const json& pod) {
    Result<json> r =
        client_->Create(kube::kPods, pod["metadata"].value("namespace", "default"), pod);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Units per (node, GPU) from the API's view of the bound pods, and the number of pods there;
  // checks every bound GPU pod's annotations on the way.
  std::map<std::pair<std::string, int>, std::pair<int64_t, int>> GpuUsageFromApi() {
    std::map<std::pair<std::string, int>, std::pair<int64_t, int>> use;
    Result<std::vector<kube::Pod>> pods = client_->ListPods("");
    EXPECT_TRUE(pods.ok());
    if (!pods.ok()) return use;
    for (const kube::Pod& p : *pods) {
      if (p.spec.node_name.empty()) continue;
      ms::PodRequest req = *kube::PodMemRequest(p);
      ms::PodAssignment a = ms::ResolveAssignment(p.metadata.annotations, req);
      EXPECT_EQ(a.state, ms::AssignmentState::kAssumed) << p.metadata.name;
      EXPECT_TRUE(a.problems.empty()) << p.metadata.name;
      for (const auto& [g, u] : ms::GpuUsage(req, a.gpus)) {
        use[{p.spec.node_name, g}].first += u.units;
        use[{p.spec.node_name, g}].second += u.clients;
      }
    }
    return use;
  }
  void ExpectWithinCapacity(const std::map<std::string, std::vector<int64_t>>& capacity) {
    for (const auto& [key, v] : GpuUsageFromApi()) {
      ASSERT_TRUE(capacity.count(key.first)) << key.first;
      ASSERT_LT(static_cast<size_t>(key.second), capacity.at(key.first).size());
      EXPECT_LE(v.first, capacity.at(key.first)[key.second]) << key.first << " GPU " << key.second;
    }
  }

  kube::testing::TempDir tmp_;
  std::unique_ptr<ApiServerProcess> api_;
  std::shared_ptr<kube::Client> client_;
  std::string kubeconfig_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

// --- the seed workload -------------------------------------------------------------------------

// The extender entry of deploy/kube-scheduler-config.yaml, pointed at the test's scheduler.
ExtenderConfig DeployedConfig(const std::string& url_prefix) {
  YAML::Node cfg =
      YAML::LoadFile(std::string(GPUSHARE_SOURCE_DIR) + "/deploy/kube-scheduler-config.yaml");
  EXPECT_EQ(cfg["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(cfg["kind"].as<std::string>(), "KubeSchedulerConfiguration");
  YAML::Node e = cfg["extenders"][0];
  ExtenderConfig c;
  const std::string deployed = e["urlPrefix"].as<std::string>();
  EXPECT_EQ(deployed.substr(deployed.rfind('/')), "/gpushare-scheduler");
  c.url_prefix = url_prefix;
  c.filter_verb = e["filterVerb"].as<std::string>();
  c.prioritize_verb = e["prioritizeVerb"].as<std::string>();
  c.bind_verb = e["bindVerb"].as<std::string>();
  if (e["preemptVerb"]) c.preempt_verb = e["preemptVerb"].as<std::string>();
  c.weight = e["weight"].as<int64_t>();
  c.node_cache_capable = e["nodeCacheCapable"].as<bool>();
  c.ignorable = e["ignorable"].as<bool>();
  const std::string timeout = e["httpTimeout"].as<std::string>();
  EXPECT_EQ(timeout.back(), 's');
  c.http_timeout = std::chrono::seconds(std::stoi(timeout));
  for (const YAML::Node& r : e["managedResources"])
    c.managed_resources.push_back(
        {r["name"].as<std::string>(), r["ignoredByScheduler"].as<bool>()});
  return c;
}

// The seed Service at maxScale on 1 node x 8 GPUs x 24 GiB, scheduled one pod at a time as
// kube-scheduler's queue does: 64 bind (8 per GPU), 36 stay Pending with the reason.
void RunSeed(IntegrationTest* t, const ExtenderConfig& config, const std::string& want_reason) {
  SeedService seed;
  if (!ReadSeedService(&seed)) GTEST_SKIP() << "SKIPPED: " << SeedManifestPath() << " absent";
  ASSERT_EQ(seed.units, 3);
  ASSERT_EQ(seed.max_scale, 100);
  ASSERT_EQ(seed.container_concurrency, 1);
  t->AddNode(NodeJson("gpu-node-1", Uniform(8, 24)));
  std::vector<std::string> names;
  for (int i = 0; i < seed.max_scale; ++i) {
    json pod = KnativePod(seed.service, seed.ns, i, seed.container, seed.image, seed.units);
    names.push_back(pod["metadata"]["name"]);
    t->AddPod(pod);
  }
  FakeKubeScheduler sched(t->client_, {{config}, 1});
  ASSERT_TRUE(sched.Validate().ok());
  int bound = 0, pending = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    ScheduleResult r = sched.ScheduleOne(seed.ns, names[i]);
    ASSERT_NE(r.kind, ScheduleResult::Kind::kError) << names[i] << ": " << r.message;
    if (r.bound()) {
      ++bound;
      EXPECT_EQ(r.node, "gpu-node-1");
    } else {
      ++pending;
      EXPECT_NE(r.message.find(want_reason), std::string::npos) << r.message;
      EXPECT_EQ(r.message.rfind("0/1 nodes are available: 1 ", 0), 0u) << r.message;
    }
    if (i % 16 == 15) t->ExpectWithinCapacity({{"gpu-node-1", std::vector<int64_t>(8, 24)}});
  }
  EXPECT_EQ(bound, 64);
  EXPECT_EQ(pending, 36);
  auto use = t->GpuUsageFromApi();
  ASSERT_EQ(use.size(), 8u);
  for (const auto& [key, v] : use) {
    EXPECT_EQ(v.first, 24) << "GPU " << key.second;
    EXPECT_EQ(v.second, 8) << "GPU " << key.second;
  }
  // What the node agent will read: Alibaba's keys and the per-container map (no queue-proxy).
  const std::vector<kube::Pod> all = t->client_->ListPods(seed.ns).value_or({});
  for (const kube::Pod& p : all) {
    if (p.spec.node_name.empty()) {
      EXPECT_EQ(p.metadata.annotations.count("ALIYUN_COM_GPU_MEM_IDX"), 0u) << p.metadata.name;
      continue;
    }
    const auto& a = p.metadata.annotations;
    EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_POD"), "3");
    EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_DEV"), "24");
    EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "false");
    EXPECT_TRUE(ms::DecodeAssumeTime(a.at("ALIYUN_COM_GPU_MEM_ASSUME_TIME")).has_value());
    EXPECT_EQ(a.at("gpushare.io/gpu-mem-assumed"),
              "{\"user-container\":" + a.at("ALIYUN_COM_GPU_MEM_IDX") + "}");
  }
}

TEST_F(IntegrationTest, SeedKnativeServiceAt100PodsWithTheDeployedConfig) {
  // deploy/kube-scheduler-config.yaml as shipped: ignoredByScheduler false, so kube-scheduler's
  // own NodeResourcesFit refuses the node once its 192 units are taken.
  StartScheduler();
  ExtenderConfig deployed = DeployedConfig(scheduler_->url_prefix());
  ASSERT_TRUE(fakes::ValidateExtenders({deployed}).ok());
  ASSERT_EQ(deployed.managed_resources.size(), 4u);
  EXPECT_EQ(deployed.managed_resources[0].name, "aliyun.com/gpu-mem");
  EXPECT_FALSE(deployed.managed_resources[0].ignored_by_scheduler);
  // Fractions and whole GPUs: booked by the extender alone (no node advertises the resource).
  EXPECT_EQ(deployed.managed_resources[1].name, "alibabacloud.com/gpu-milli");
  EXPECT_TRUE(deployed.managed_resources[1].ignored_by_scheduler);
  // Compute shares: no node advertises them either.
  EXPECT_EQ(deployed.managed_resources[2].name, "aliyun.com/gpu-core.percentage");
  EXPECT_TRUE(deployed.managed_resources[2].ignored_by_scheduler);
  EXPECT_EQ(deployed.managed_resources[3].name, "nvidia.com/gpucores");
  EXPECT_TRUE(deployed.managed_resources[3].ignored_by_scheduler);
  EXPECT_TRUE(deployed.node_cache_capable);
  RunSeed(this, deployed, "Insufficient aliyun.com/gpu-mem");
}

// Compute shares through kube-scheduler with the deployed configuration: the resource no node
// advertises is left to the extender, which keeps each GPU's shares at or below 100 % and says
// why when no GPU has the share left.
TEST_F(IntegrationTest, ComputeSharesWithTheDeployedConfig) {
  StartScheduler();
  const ExtenderConfig deployed = DeployedConfig(scheduler_->url_prefix());
  AddNode(NodeJson("gpu-node-1", Uniform(2, 24)));
  FakeKubeScheduler sched(client_, {{deployed}, 1});
  ASSERT_TRUE(sched.Validate().ok());
  std::map<std::string, int> gpu_of;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "c" + std::to_string(i);
    json pod = SimplePod(name, 2);
    pod["spec"]["containers"][0]["resources"]["limits"]
       [i % 2 ? "nvidia.com/gpucores" : "aliyun.com/gpu-core.percentage"] = "45";
    AddPod(pod);
    ScheduleResult r = sched.ScheduleOne("default", name);
    ASSERT_NE(r.kind, ScheduleResult::Kind::kError) << name << ": " << r.message;
    if (i < 4) {
      ASSERT_TRUE(r.bound()) << name << ": " << r.message;
      Result<kube::Pod> p = client_->GetPod("default", name);
      ASSERT_TRUE(p.ok());
      gpu_of[name] = std::stoi(p->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"));
      continue;
    }
    // Two 45 % shares on each GPU: the fifth has memory but no compute left anywhere.
    EXPECT_FALSE(r.bound());
    EXPECT_NE(r.message.find("no GPU here has the pod's compute share left"), std::string::npos)
        << r.message;
  }
  std::map<int, int> per_gpu;
  for (const auto& [name, g] : gpu_of) ++per_gpu[g];
  EXPECT_EQ(per_gpu, (std::map<int, int>{{0, 2}, {1, 2}}));
}

TEST_F(IntegrationTest, SeedKnativeServiceAt100PodsRefusedByTheExtender) {
  // With ignoredByScheduler true the extender alone decides, and says why.
  StartScheduler();
  RunSeed(this, Config(true, true), "no GPU has 3 GiB free for container user-container");
}

// --- preemption (issue 23) ---------------------------------------------------------------------

// A pod of `units` with a priority, started at `start` (RFC 3339).
json PriorityPod(const std::string& name, int64_t units, int32_t priority, int start_minute = 0) {
  json p = SimplePod(name, units, "");
  p["metadata"].erase("uid");
  p["spec"]["priority"] = priority;
  p["metadata"]["labels"]["app"] = name.substr(0, name.find('-'));
  char start[32];
  std::snprintf(start, sizeof start, "2026-12-01T%02d:%02d:00Z", start_minute / 60,
                start_minute % 60);
  p["status"]["startTime"] = start;
  return p;
}

// `pod` as the API shows it once bound to `node` and confirmed on GPU `gpu` by gpushare-node.
json Confirmed(json pod, const std::string& node, int gpu) {
  pod["spec"]["nodeName"] = node;
  pod["status"]["phase"] = "Running";
  const ms::PodRequest req = *kube::PodMemRequest(*kube::DecodePod(pod));
  ms::ContainerGpus gpus;
  for (const std::string& c : req.DemandContainers()) gpus[c] = gpu;
  auto a = ms::BindAnnotations(req, std::vector<int>(gpus.size(), gpu), 22, 1);
  for (const auto& [k, v] : ms::ConfirmAnnotations(req, gpus)) a[k] = v;
  for (const auto& [k, v] : a) pod["metadata"]["annotations"][k] = v;
  return pod;
}

// kubelet finishes the graceful deletions kube-scheduler's preemption started.
void FinishDeletions(kube::Client& api) {
  for (const kube::Pod& p : api.ListPods("").value_or({}))
    if (p.IsBeingDeleted()) {
      kube::DeleteOptions d;
      d.grace_period_seconds = 0;
      (void)api.Delete(kube::kPods, p.metadata.namespace_, p.metadata.name, d);
    }
}

TEST_F(IntegrationTest, PreemptionFreesOneGpuAndTheNomineeGetsIt) {
  // The issue's node: 8 GPUs of 22 GiB, seven 3 GiB pods of priority 0 on each (56), then a
  // 22 GiB pod of priority 1000. kube-scheduler alone (node total: 8 free) would evict five pods
  // over two GPUs; with the deployed preemptVerb it evicts the seven pods of one GPU.
  StartScheduler();
  ExtenderConfig deployed = DeployedConfig(scheduler_->url_prefix());
  ASSERT_EQ(deployed.preempt_verb, "preempt");
  AddNode(NodeJson("mem", Uniform(8, 22)));
  FakeKubeScheduler sched(client_, {{deployed}, 1});
  for (int i = 0; i < 56; ++i)
    AddPod(Confirmed(PriorityPod("batch-" + std::to_string(i), 3, 0, i), "mem", i / 7));

  AddPod(PriorityPod("serving-0", 22, 1000, 100));
  ScheduleResult r = sched.ScheduleOne("default", "serving-0");
  ASSERT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable) << r.message;
  EXPECT_EQ(r.nominated_node, "mem") << r.preemption_message;
  ASSERT_EQ(r.victims.size(), 7u) << "the pods of one GPU, not the node total's five";
  std::set<int> freed;
  for (const kube::Pod& p : client_->ListPods("default").value_or({}))
    if (std::find(r.victims.begin(), r.victims.end(), p.metadata.uid) != r.victims.end())
      for (const auto& [c, g] :
           ms::ResolveAssignment(p.metadata.annotations, *kube::PodMemRequest(p)).gpus)
        freed.insert(g);
  ASSERT_EQ(freed.size(), 1u);
  const int gpu = *freed.begin();
  // While the victims terminate it preempts nothing more.
  r = sched.ScheduleOne("default", "serving-0");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_TRUE(r.victims.empty());
  EXPECT_NE(r.preemption_message.find("terminating pod on the nominated node"), std::string::npos)
      << r.preemption_message;
  FinishDeletions(*client_);
  // A replacement of lower priority does not take the freed GPU.
  AddPod(PriorityPod("batch-56", 3, 0, 101));
  ASSERT_TRUE(WaitUntil([&] {
    r = sched.ScheduleOne("default", "batch-56");
    return r.message.find("held for pending pod default/serving-0") != std::string::npos;
  })) << r.message;
  EXPECT_FALSE(r.bound());
  EXPECT_TRUE(r.victims.empty()) << "equal priorities preempt nothing";
  // The nominee binds, to the GPU its victims freed.
  ASSERT_TRUE(WaitUntil([&] { return (r = sched.ScheduleOne("default", "serving-0")).bound(); }))
      << r.message << " " << r.preemption_message;
  Result<kube::Pod> serving = client_->GetPod("default", "serving-0");
  ASSERT_TRUE(serving.ok());
  EXPECT_EQ(ms::ResolveAssignment(serving->metadata.annotations, *kube::PodMemRequest(*serving))
                .gpus.at("main"),
            gpu);
  std::map<int, int64_t> used;  // confirmed and assumed alike
  for (const kube::Pod& p : client_->ListPods("default").value_or({})) {
    if (p.spec.node_name.empty()) continue;
    const ms::PodRequest req = *kube::PodMemRequest(p);
    for (const auto& [g, u] :
         ms::GpuUsage(req, ms::ResolveAssignment(p.metadata.annotations, req).gpus))
      used[g] += u.units;
  }
  for (const auto& [g, u] : used) EXPECT_LE(u, 22) << "GPU " << g;
  EXPECT_EQ(used[gpu], 22);

  // 23 GiB fits no GPU even empty: nothing is evicted, and the pod says why.
  AddPod(PriorityPod("serving-1", 23, 1000, 102));
  const size_t before = client_->ListPods("default").value_or({}).size();
  r = sched.ScheduleOne("default", "serving-1");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_TRUE(r.victims.empty());
  EXPECT_EQ(r.preemption_message, "no candidate node for preemption");
  EXPECT_EQ(client_->ListPods("default").value_or({}).size(), before);
  ASSERT_TRUE(WaitUntil([&] {
    Result<kube::RawList> events = client_->List(kube::kEvents, "default", {});
    if (!events.ok()) return false;
    for (const json& e : events->items)
      if (e.value("reason", "") == "PreemptionNotHelpful" &&
          e["involvedObject"].value("name", "") == "serving-1")
        return true;
    return false;
  }));
}

TEST_F(IntegrationTest, PreemptionTakesTheGpuABudgetAllowsOrNone) {
  // The budget exists before gpushare-scheduler starts: its preempt verb answers only once the
  // budgets are listed, so no choice is made without it.
  json pdb = json::parse(R"({"metadata": {"name": "guarded", "namespace": "default"},
      "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "maxUnavailable": 0},
      "status": {"disruptionsAllowed": 0}})");
  ASSERT_TRUE(client_->Create(kube::kPodDisruptionBudgets, "default", pdb).ok());
  StartScheduler();
  ExtenderConfig deployed = DeployedConfig(scheduler_->url_prefix());
  AddNode(NodeJson("mem", Uniform(2, 22)));
  FakeKubeScheduler sched(client_, {{deployed}, 1});
  // Seven "guarded" pods on GPU 0 (the budget allows none of them to go), seven "batch" pods on
  // GPU 1.
  for (int i = 0; i < 14; ++i)
    AddPod(Confirmed(PriorityPod((i < 7 ? "guarded-" : "batch-") + std::to_string(i), 3, 0, i),
                     "mem", i / 7));
  AddPod(PriorityPod("serving-0", 22, 1000, 100));
  ScheduleResult r = sched.ScheduleOne("default", "serving-0");
  if (r.victims.size() != 7u) {
    scheduler_->Kill();
    FAIL() << r.message << " " << r.preemption_message << "\n" << scheduler_->Log();
  }
  for (const kube::Pod& p : client_->ListPods("default").value_or({})) {
    if (std::find(r.victims.begin(), r.victims.end(), p.metadata.uid) != r.victims.end()) {
      EXPECT_EQ(p.metadata.labels.at("app"), "batch") << "the budget's pods are kept";
    }
  }
  FinishDeletions(*client_);
  // Now every pod left is guarded: a second such pod evicts nothing.
  AddPod(PriorityPod("serving-1", 22, 1000, 101));
  r = sched.ScheduleOne("default", "serving-1");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_TRUE(r.victims.empty());
  EXPECT_EQ(r.preemption_message, "no candidate node for preemption");
}

// --- GPUs of different sizes, and the full-NodeList mode ---------------------------------------

TEST_F(IntegrationTest, GpusOfDifferentSizesInBothNodeCacheModes) {
  // Every node that fits passed, so that prioritize ranks them (with the default
  // --filter-keep-best 1 kube-scheduler has one node left and calls no prioritize).
  StartScheduler(0, {"--filter-keep-best", "0"});
  AddNode(NodeJson("mixed", {{16}, {24}, {40}}));
  AddNode(NodeJson("pair", Uniform(2, 24)));
  for (int i = 0; i < 12; ++i) AddPod(SimplePod("p" + std::to_string(i), 10));
  FakeKubeScheduler full(client_, {{Config(false, true)}, 3});
  FakeKubeScheduler names(client_, {{Config(true, true)}, 3});
  int bound = 0, prioritized = 0;
  std::string last;
  for (int i = 0; i < 12; ++i) {
    ScheduleResult r = (i % 2 ? names : full).ScheduleOne("default", "p" + std::to_string(i));
    ASSERT_NE(r.kind, ScheduleResult::Kind::kError) << r.message;
    if (r.bound()) {
      ++bound;
      prioritized += r.prioritize_called;
      if (r.prioritize_called) {
        EXPECT_EQ(r.scores.size(), 2u);
        EXPECT_EQ(std::max(r.scores["mixed"], r.scores["pair"]),
                  100);  // the extender's 10 x weight 1 x 10
      }
    } else {
      last = r.message;
    }
  }
  EXPECT_EQ(bound, 7 + 4);
  EXPECT_GT(prioritized, 0);
  EXPECT_NE(last.find("0/2 nodes are available: "), std::string::npos) << last;
  EXPECT_NE(last.find("no GPU has 10 GiB free for container main"), std::string::npos) << last;
  auto use = GpuUsageFromApi();
  EXPECT_EQ(use[std::make_pair(std::string("mixed"), 0)].first, 10);
  EXPECT_EQ(use[std::make_pair(std::string("mixed"), 1)].first, 20);
  EXPECT_EQ(use[std::make_pair(std::string("mixed"), 2)].first, 40);
  EXPECT_EQ(use[std::make_pair(std::string("pair"), 0)].first, 20);
  EXPECT_EQ(use[std::make_pair(std::string("pair"), 1)].first, 20);
  // A container larger than every GPU of a node: unresolvable there, with the sizes.
  AddPod(SimplePod("huge", 30));
  ExtenderClient ext(Config(true));
  Result<fakes::FilterOutcome> f =
      ext.Filter(*client_->Get(kube::kPods, "default", "huge"),
                 {NodeJson("mixed", {{16}, {24}, {40}}), NodeJson("pair", Uniform(2, 24))});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NE(
      f->unresolvable.at("pair").find("asks 30 GiB, more than any GPU here has (largest: 24 GiB)"),
      std::string::npos);
  EXPECT_NE(f->failed.at("mixed").find("no GPU has 30 GiB free"), std::string::npos);
}

// --- concurrency -------------------------------------------------------------------------------

TEST_F(IntegrationTest, ConcurrentBindsNeverOverCommit) {
  StartScheduler();
  AddNode(NodeJson("n", Uniform(8, 24)));
  const int kPods = 100;
  std::vector<json> pods;
  for (int i = 0; i < kPods; ++i) {
    AddPod(SimplePod("c" + std::to_string(i), 3));
    pods.push_back(*client_->Get(kube::kPods, "default", "c" + std::to_string(i)));
  }
  ExtenderClient ext(Config(true));
  std::atomic<int> next{0}, ok{0}, refused{0};
  std::vector<std::string> other_errors;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < kPods;) {
        Status s = ext.Bind(pods[i], "n");
        if (s.ok()) {
          ok.fetch_add(1);
        } else if (s.message().find("no GPU has 3 GiB free") != std::string::npos) {
          refused.fetch_add(1);
        } else {
          std::lock_guard<std::mutex> l(mu);
          other_errors.push_back(s.message());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(other_errors.empty()) << other_errors.front();
  EXPECT_EQ(ok.load(), 64);
  EXPECT_EQ(refused.load(), kPods - 64);
  ExpectWithinCapacity({{"n", std::vector<int64_t>(8, 24)}});
  int bound = 0;
  const std::vector<kube::Pod> all = client_->ListPods("default").value_or({});
  for (const kube::Pod& p : all) bound += !p.spec.node_name.empty();
  EXPECT_EQ(bound, 64);
}

// --- restarts ----------------------------------------------------------------------------------

TEST_F(IntegrationTest, RestartsInTheMiddleOfABurstNeverDoubleAssign) {
  // No gpushare-node here confirms anything, so the hold after a restart (which waits for its
  // confirmations) is off; tests/e2e has the restarts with the node agent and the hold.
  const std::vector<std::string> no_hold = {"--restart-hold", "0s"};
  StartScheduler(0, no_hold);
  const int port = scheduler_->port();
  AddNode(NodeJson("a", Uniform(8, 24)));
  AddNode(NodeJson("b", Uniform(8, 24)));
  const int kPods = 150;
  std::deque<std::string> queue;
  for (int i = 0; i < kPods; ++i) {
    AddPod(SimplePod("r" + std::to_string(i), 3));
    queue.push_back("r" + std::to_string(i));
  }
  FakeKubeScheduler sched(client_, {{Config(true, true)}, 5});
  std::atomic<int> bound{0};
  std::atomic<bool> done{false};
  // The restarter: SIGKILL after 40 binds, SIGTERM after 90 (each time a new process on the
  // same port, which must rebuild its cache from the API before it answers).
  std::thread restarter([&] {
    for (int at : {40, 90}) {
      while (bound.load() < at && !done.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (done.load()) return;
      if (at == 40) {
        scheduler_->Kill();
      } else {
        EXPECT_EQ(scheduler_->Terminate(), 0);
      }
      scheduler_ = std::make_unique<SchedulerProcess>(tmp_.path(), kubeconfig_, port, no_hold);
    }
  });
  int pending = 0, errors = 0;
  while (!queue.empty()) {
    const std::string name = queue.front();
    queue.pop_front();
    // A bind the killed process had sent may land after kube-scheduler gave up on it; a bound
    // pod leaves kube-scheduler's queue.
    Result<kube::Pod> now = client_->GetPod("default", name);
    if (now.ok() && !now->spec.node_name.empty()) {
      bound.fetch_add(1);
      continue;
    }
    ScheduleResult r = sched.ScheduleOne("default", name);
    if (r.bound()) {
      bound.fetch_add(1);
    } else if (r.kind == ScheduleResult::Kind::kUnschedulable) {
      ++pending;
    } else {
      ++errors;  // the extender was down or not synced: kube-scheduler retries later
      queue.push_back(name);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ASSERT_LT(errors, 5000) << r.message;
    }
  }
  done.store(true);
  restarter.join();
  EXPECT_GT(errors, 0);  // the restarts did happen while pods were waiting
  EXPECT_EQ(bound.load(), 128);
  EXPECT_EQ(pending, kPods - 128);
  auto use = GpuUsageFromApi();
  for (const auto& [key, v] : use) {
    EXPECT_EQ(v.first, 24) << key.first << " GPU " << key.second;
    EXPECT_EQ(v.second, 8) << key.first << " GPU " << key.second;
  }
  EXPECT_EQ(use.size(), 16u);
  ASSERT_TRUE(scheduler_->WaitReady());
  ASSERT_TRUE(scheduler_->WaitForLog("event=cache_synced nodes=2 usable_gpus=16"));
}

TEST_F(IntegrationTest, NotReadyUntilTheApiServerAnswers) {
  const int api_port = api_->port();
  api_->Stop();
  scheduler_ = std::make_unique<SchedulerProcess>(tmp_.path(), kubeconfig_, 0);
  ASSERT_TRUE(scheduler_->ok());
  httplib::Client http("127.0.0.1", scheduler_->port());
  ASSERT_TRUE(WaitUntil([&] {
    httplib::Result r = http.Get("/readyz");
    return r && r->status == 503 && r->body.find("last error") != std::string::npos;
  }));
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  httplib::Result f =
      http.Post("/gpushare-scheduler/filter",
                R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["n"]})", "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200);
  EXPECT_NE(f->body.find("\"Error\":\"cache not synced"), std::string::npos) << f->body;
  api_ = std::make_unique<ApiServerProcess>(GPUSHARE_FAKE_APISERVER_BIN, tmp_.path(), api_port);
  ASSERT_TRUE(api_->ok());
  EXPECT_TRUE(scheduler_->WaitReady());
}

// --- bad requests ------------------------------------------------------------------------------

TEST_F(IntegrationTest, BadRequestsAreRefusedWithAReasonAndNeverCrash) {
  StartScheduler();
  AddNode(NodeJson("n", Uniform(1, 24)));
  AddPod(SimplePod("p", 3));
  httplib::Client http("127.0.0.1", scheduler_->port());
  auto post = [&](const std::string& verb, const std::string& body,
                  const std::string& type = "application/json") {
    httplib::Result r = http.Post("/gpushare-scheduler/" + verb, body, type.c_str());
    EXPECT_TRUE(r) << verb;
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  auto expect = [&](std::pair<int, std::string> got, int code, const std::string& text) {
    EXPECT_EQ(got.first, code) << got.second;
    EXPECT_NE(got.second.find(text), std::string::npos) << got.second;
    EXPECT_FALSE(json::parse(got.second, nullptr, false).is_discarded()) << got.second;
  };
  expect(post("filter", "{\"Pod\":"), 400, "malformed JSON");
  expect(post("filter", "[]"), 400, "must be a JSON object");
  expect(post("filter", R"({"Pod":{"spec":{"containers":{}}},"NodeNames":["n"]})"), 400, "Pod");
  expect(post("filter", R"({"Pod":{},"NodeNames":"n"})"), 400, "NodeNames: must be an array");
  expect(post("filter", "{\"Pod\":" + std::string(100000, '[')), 400, "nesting deeper than 64");
  expect(post("bind", "{\"PodName\":" + std::string(100000, '{')), 400, "nesting deeper than 64");
  expect(post("filter", std::string(9u << 20, ' ')), 413, "larger than 8388608 bytes");
  expect(post("filter", "{}", "text/plain"), 415, "Content-Type must be application/json");
  expect(post("prioritize", "nope"), 400, "malformed JSON");
  expect(post("bind", R"({"PodName":"p"})"), 400, "PodNamespace: missing");
  expect(post("bind", R"({"PodName":"ghost","PodNamespace":"default","PodUID":"x","Node":"n"})"),
         200, "pod default/ghost not found");
  expect(post("bind", R"({"PodName":"p","PodNamespace":"default","PodUID":"other","Node":"n"})"),
         200, "the pod was recreated");
  // A pod whose gpu-mem request and limit differ (input that did not come through the API).
  const json bad_pod =
      R"({"metadata":{"name":"x","namespace":"default"},"spec":{"containers":[{"name":"c",
      "resources":{"limits":{"aliyun.com/gpu-mem":"3"},"requests":{"aliyun.com/gpu-mem":"2"}}}]}})"_json;
  expect(post("filter", json{{"Pod", bad_pod}, {"Nodes", nullptr}, {"NodeNames", {"n"}}}.dump()),
         200, "differs from limit");
  // Lower-case keys, as Go would accept them.
  expect(post("filter", json{{"pod", *client_->Get(kube::kPods, "default", "p")},
                             {"nodenames", {"n", "ghost"}}}
                            .dump()),
         200, R"("NodeNames":["n"])");
  httplib::Result get = http.Get("/gpushare-scheduler/filter");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  httplib::Result missing = http.Post("/gpushare-scheduler/unreserve", "{}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("served: /gpushare-scheduler/filter"), std::string::npos)
      << missing->body;
  // The preempt verb is served: a body without a Pod is a bad request that names the field.
  httplib::Result bad_preempt = http.Post("/gpushare-scheduler/preempt", "{}", "application/json");
  ASSERT_TRUE(bad_preempt);
  EXPECT_EQ(bad_preempt->status, 400);
  EXPECT_NE(bad_preempt->body.find("Pod: missing"), std::string::npos) << bad_preempt->body;
  // Still serving, still answering correctly.
  EXPECT_TRUE(scheduler_->Running());
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  EXPECT_TRUE(
      ExtenderClient(Config(true)).Bind(*client_->Get(kube::kPods, "default", "p"), "n").ok());
  httplib::Result metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpushare_scheduler_bad_requests_total"), std::string::npos);
  EXPECT_EQ(scheduler_->Terminate(), 0);
  EXPECT_NE(scheduler_->Log().find("event=filter_bad_request"), std::string::npos);
}

// --- TLS ---------------------------------------------------------------------------------------

std::string BindingBody(const std::string& pod, const std::string& node) {
  return json{
      {"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", "uid-" + pod}, {"Node", node}}
      .dump();
}

// kube-scheduler's extender entry with enableHTTPS and tlsConfig, against the real binary with
// --tls-cert-file, --tls-private-key-file and --client-ca-file (mutual TLS). Certificates are
// made at test time (tests/kube/test_util.h): a CA with a server certificate for 127.0.0.1 and
// kubernetes.default.svc and a client certificate, plus an unrelated CA.
TEST_F(IntegrationTest, TheExtenderOverMutualTlsAsKubeSchedulerConfiguresIt) {
  kube::testing::TlsMaterial tls = kube::testing::MakeTls(tmp_);
  if (!tls.ok) GTEST_SKIP() << "SKIPPED: the openssl command-line tool is missing";
  StartScheduler(0, {"--tls-cert-file", tls.server_crt, "--tls-private-key-file", tls.server_key,
                     "--client-ca-file", tls.ca_crt, "--health-listen", "127.0.0.1:0"});
  AddNode(NodeJson("n", Uniform(2, 24)));
  for (int i = 0; i < 6; ++i) AddPod(SimplePod("p" + std::to_string(i), 4));
  ExtenderConfig base = Config(true);
  base.url_prefix = scheduler_->url_prefix("https");
  base.enable_https = true;
  auto schedule = [&](const ExtenderConfig& c, const std::string& pod) {
    FakeKubeScheduler sched(client_, {{c}, 1});
    EXPECT_TRUE(sched.Validate().ok()) << sched.Validate().message();
    return sched.ScheduleOne("default", pod);
  };
  // Files, as tlsConfig.certFile/keyFile/caFile.
  ExtenderConfig files = base;
  files.tls_config =
      fakes::ExtenderTlsConfig{false, "", tls.client_crt, tls.client_key, tls.ca_crt, "", "", ""};
  ScheduleResult r = schedule(files, "p0");
  EXPECT_TRUE(r.bound()) << r.message;
  // PEM bytes, as certData/keyData/caData.
  ExtenderConfig data = base;
  data.tls_config = fakes::ExtenderTlsConfig{
      false, "", "", "", "", tls.Pem(tls.client_crt), tls.Pem(tls.client_key), tls.Pem(tls.ca_crt)};
  r = schedule(data, "p1");
  EXPECT_TRUE(r.bound()) << r.message;
  // serverName: the name checked instead of the URL's host.
  ExtenderConfig named = files;
  named.tls_config->server_name = "kubernetes.default.svc";
  r = schedule(named, "p2");
  EXPECT_TRUE(r.bound()) << r.message;
  named.tls_config->server_name = "gpushare-scheduler.example";
  r = schedule(named, "p3");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError) << r.message;
  // enableHTTPS without a CA: the server is not verified (as kube-scheduler does).
  ExtenderConfig no_ca = files;
  no_ca.tls_config->ca_file.clear();
  r = schedule(no_ca, "p3");
  EXPECT_TRUE(r.bound()) << r.message;
  // Refused: no client certificate; a client that trusts another CA.
  ExtenderConfig no_cert = files;
  no_cert.tls_config->cert_file.clear();
  no_cert.tls_config->key_file.clear();
  r = schedule(no_cert, "p4");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError) << r.message;
  ExtenderConfig wrong_ca = files;
  wrong_ca.tls_config->ca_file = tls.other_ca_crt;
  r = schedule(wrong_ca, "p4");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError);
  EXPECT_NE(r.message.find("certificate"), std::string::npos) << r.message;
  // Plain HTTP to the TLS port: refused, with words that say so.
  ExtenderConfig plain = Config(true);
  Result<std::string> p = ExtenderClient(plain).Post("filter", "{}");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("client sent an HTTP request to an HTTPS server"),
            std::string::npos)
      << p.status().message();
  // A CA with insecure is refused by the configuration check, as kube-scheduler refuses it.
  ExtenderConfig both = files;
  both.tls_config->insecure = true;
  FakeKubeScheduler invalid(client_, {{both}, 1});
  EXPECT_NE(invalid.Validate().message().find("insecure flag is not allowed"), std::string::npos);
  // The health listener serves the probes and metrics, never a verb.
  httplib::Client health("127.0.0.1", scheduler_->health_port());
  httplib::Result h =
      health.Post("/gpushare-scheduler/bind", BindingBody("p4", "n"), "application/json");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 404);
  EXPECT_EQ(health.Get("/readyz")->status, 200);
  EXPECT_NE(health.Get("/metrics")->body.find("gpushare_scheduler_tls_handshake_errors_total"),
            std::string::npos);
  // Nothing was bound by the refused attempts.
  EXPECT_TRUE(client_->GetPod("default", "p4")->spec.node_name.empty());
  EXPECT_TRUE(scheduler_->Running());
  EXPECT_EQ(scheduler_->Terminate(), 0);
  EXPECT_NE(scheduler_->Log().find("event=tls_handshake_failed"), std::string::npos);
  EXPECT_NE(scheduler_->Log().find("tls=on client_certs=required"), std::string::npos);
}

// The chart's extender mode (deploy/manifests/gpushare-extender.yaml, rendered from
// deploy/helm/gpushare) keeps the extender on the node's loopback (issue 10 §2): no Service
// port reaches it, gpushare-scheduler listens on 127.0.0.1 in the host's network namespace
// beside kube-scheduler, kube-scheduler calls that address and port, and the probes go to the
// health listener, which is not on loopback (kubelet probes the node's address). The
// second-scheduler mode keeps it on the pod's loopback, where only kube-scheduler's container
// (same pod) calls it.
TEST(DeployedManifests, KeepTheExtenderOnLoopback) {
  const std::string dir = std::string(GPUSHARE_SOURCE_DIR) + "/deploy/";
  std::string listen, health_listen, probe_port;
  bool host_network = false;
  std::vector<std::string> service_ports;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(dir + "manifests/gpushare-extender.yaml")) {
    if (!doc.IsMap()) continue;
    const std::string kind = doc["kind"].as<std::string>("");
    if (kind == "Service")
      for (const YAML::Node& p : doc["spec"]["ports"])
        service_ports.push_back(p["targetPort"].as<std::string>(""));
    if (kind != "DaemonSet" || doc["metadata"]["name"].as<std::string>("") != "gpushare-scheduler")
      continue;
    const YAML::Node spec = doc["spec"]["template"]["spec"];
    host_network = spec["hostNetwork"].as<bool>(false);
    const YAML::Node c = spec["containers"][0];
    for (const YAML::Node& a : c["args"]) {
      const std::string arg = a.as<std::string>();
      if (arg.rfind("--listen=", 0) == 0) listen = arg.substr(9);
      if (arg.rfind("--health-listen=", 0) == 0) health_listen = arg.substr(16);
    }
    for (const char* probe : {"readinessProbe", "livenessProbe"}) {
      const std::string port = c[probe]["httpGet"]["port"].as<std::string>("");
      for (const YAML::Node& p : c["ports"])
        if (p["name"].as<std::string>("") == port)
          probe_port = p["containerPort"].as<std::string>();
      EXPECT_FALSE(probe_port.empty()) << probe;
    }
  }
  EXPECT_TRUE(host_network);
  ASSERT_EQ(listen.rfind("127.0.0.1:", 0), 0u) << listen;
  const std::string extender_port = listen.substr(listen.rfind(':') + 1);
  for (const std::string& p : service_ports)
    EXPECT_NE(p, extender_port) << "a Service reaches the extender";
  EXPECT_EQ(health_listen.substr(health_listen.rfind(':') + 1), probe_port) << health_listen;
  EXPECT_EQ(health_listen.rfind("127.", 0), std::string::npos)
      << "kubelet cannot probe a loopback listener";
  YAML::Node cfg = YAML::LoadFile(dir + "kube-scheduler-config.yaml");
  const std::string url = cfg["extenders"][0]["urlPrefix"].as<std::string>();
  EXPECT_EQ(url, "http://" + listen + "/gpushare-scheduler");

  // Second-scheduler mode: the extender on the pod's loopback, no Service port reaching it.
  std::string pod_listen;
  service_ports.clear();
  for (const YAML::Node& doc :
       YAML::LoadAllFromFile(dir + "manifests/gpushare-second-scheduler.yaml")) {
    if (!doc.IsMap()) continue;
    const std::string kind = doc["kind"].as<std::string>("");
    if (kind == "Service")
      for (const YAML::Node& p : doc["spec"]["ports"])
        service_ports.push_back(p["targetPort"].as<std::string>(""));
    if (kind != "Deployment") continue;
    EXPECT_FALSE(doc["spec"]["template"]["spec"]["hostNetwork"].as<bool>(false));
    for (const YAML::Node& c : doc["spec"]["template"]["spec"]["containers"])
      for (const YAML::Node& a : c["args"]) {
        const std::string arg = a.as<std::string>();
        if (arg.rfind("--listen=", 0) == 0) pod_listen = arg.substr(9);
      }
  }
  ASSERT_EQ(pod_listen.rfind("127.0.0.1:", 0), 0u) << pod_listen;
  for (const std::string& p : service_ports)
    EXPECT_NE(p, pod_listen.substr(pod_listen.rfind(':') + 1));
}

// Every flag problem exits 2 with a line that names the flag, before anything starts.
TEST(SchedulerFlags, BadFlagsExit2NamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--listen", "nowhere"}, "--listen: want ADDR:PORT"},
      {{"--memory-unit", "GB"}, "--memory-unit: must be GiB or MiB"},
      {{"--policy", "fdg"}, "--policy: unknown policy \"fdg\""},
      {{"--kube-api-qps", "0"}, "--kube-api-qps: must be a number > 0"},
      {{"--assume-timeout", "soon"}, "--assume-timeout"},
      {{"--http-threads", "many"}, "--http-threads"},
      {{"--no-such-flag"}, "--no-such-flag"},
      // Every number is range-checked (issue 10 §5: -5 used to become 18446744073709551611).
      {{"--max-body-bytes", "-5"}, "--max-body-bytes: must be 1024..1073741824, got -5"},
      {{"--max-body-bytes", "18446744073709551611"}, "--max-body-bytes: must be 1024..1073741824"},
      {{"--max-body-bytes", "1e6"}, "--max-body-bytes: want a whole number"},
      {{"--max-body-bytes", "100"}, "--max-body-bytes: must be 1024..1073741824, got 100"},
      {{"--http-threads", "-1"}, "--http-threads: must be 2..1024, got -1"},
      {{"--http-threads", "1"}, "--http-threads: must be 2..1024, got 1"},
      {{"--http-threads", "4294967298"}, "--http-threads: must be 2..1024"},
      {{"--http-max-connections", "-3"}, "--http-max-connections: must be 0..1048576, got -3"},
      {{"--http-max-connections", "8"},
       "--http-max-connections: must be 0 (from RLIMIT_NOFILE) or 16..1048576"},
      {{"--kube-api-qps", "-1"}, "--kube-api-qps: must be a number > 0"},
      {{"--kube-api-qps", "nan"}, "--kube-api-qps: must be a number > 0"},
      {{"--kube-api-qps", "inf"}, "--kube-api-qps: must be a number > 0"},
      {{"--kube-api-qps", "1e9"}, "--kube-api-qps: must be a number > 0 and <= 100000"},
      {{"--kube-api-burst", "-2"}, "--kube-api-burst: must be 1..100000, got -2"},
      {{"--kube-api-burst", "99999999999999999999"}, "--kube-api-burst: must be 1..100000"},
      {{"--assume-timeout", "0"}, "--assume-timeout: must be a positive duration"},
      {{"--assume-timeout", "-5m"}, "--assume-timeout: want a duration"},
      {{"--expiry-interval", "1000h"}, "--expiry-interval: must be a positive duration up to 24h"},
      {{"--http-read-header-timeout", "0"}, "--http-read-header-timeout: must be 100ms..1h, got 0"},
      {{"--http-read-timeout", "2h"}, "--http-read-timeout: must be 100ms..1h, got 2h"},
      {{"--http-idle-timeout", "-1s"}, "--http-idle-timeout: want a duration"},
      {{"--listen", "127.0.0.1:99999"}, "--listen: want ADDR:PORT"},
      {{"--health-listen", "nowhere"}, "--health-listen: want ADDR:PORT"},
      {{"--tls-cert-file", "/x.crt"}, "--tls-cert-file: given without --tls-private-key-file"},
      {{"--client-ca-file", "/ca.crt"}, "--client-ca-file: needs --tls-cert-file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {SchedulerBinary()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    gpushare::testing::ProcessResult r = gpushare::testing::RunProcess(argv, {});
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args[0] << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpushare::scheduler
