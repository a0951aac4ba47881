// gpushare-node's memory mode as a real process, against the fake-apiserver binary and the
// kubelet double (device plugin + PodResources v1), with the scheduler's decisions written
// into the pods by the test: the node annotation and gpu-count, steering to the assumed GPU,
// Allocate's answer, the reconciler's corrections (identical pods admitted in the opposite
// order), pods with several containers and sidecars, agent restarts, kubelet's rate limit,
// and bad requests.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <thread>

#include "tests/e2e/memshare_env.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::e2e {
namespace {

using scheduler::testing::MilliPod;
using scheduler::testing::PodJson;
using scheduler::testing::SimplePod;
using scheduler::testing::WithCore;
using ::testing::HasSubstr;

std::string Annotation(MemShareEnv& env, const std::string& name, const std::string& key) {
  Result<kube::Pod> p = env.api()->GetPod("default", name);
  if (!p.ok()) return "<no pod>";
  auto it = p->metadata.annotations.find(key);
  return it == p->metadata.annotations.end() ? "<unset>" : it->second;
}

const fakes::AllocationRecord* Record(const std::vector<fakes::AllocationRecord>& all,
                                      const std::string& pod, const std::string& container) {
  for (const auto& r : all) {
    if (r.pod_name == pod && r.container == container && r.resource == kMem) return &r;
  }
  return nullptr;
}

TEST(NodeMemoryShares, PublishesTheInventoryAndGpuCountAndKeepsThemTrue) {
  NodeSpec spec;
  spec.gpu_mib = {24576, 16160, 81920};
  spec.memory_shares = "    devices: [0, 1, 2]\n";
  spec.max_clients = 12;
  MemShareEnv env(spec);
  const std::string events = env.dir() + "/health-events";
  { std::ofstream(events) << ""; }
  env.StartApi();
  env.AddNode();
  env.StartKubelet();
  env.StartAgent({"--health-events", events});
  env.WaitServing();
  ms::NodeInventory inv = env.Inventory();
  ASSERT_EQ(inv.gpus.size(), 3u);
  EXPECT_EQ(inv.max_clients_per_gpu, 12);
  EXPECT_EQ(inv.unit, ms::MemoryUnit::kGiB);
  EXPECT_EQ(inv.gpus[0].units, 24);
  EXPECT_EQ(inv.gpus[1].units, 15);  // 16160 MiB rounded down
  EXPECT_EQ(inv.gpus[2].units, 80);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(inv.gpus[i].uuid, GpuUuidFor(i));
    EXPECT_EQ(inv.gpus[i].mode, "memory");
    EXPECT_TRUE(inv.gpus[i].healthy);
  }
  // The count follows the annotation (a second patch, of nodes/status).
  ASSERT_TRUE(WaitUntil([&] {
    auto n = env.api()->GetNode(spec.name);
    return n.ok() && n->status.capacity["aliyun.com/gpu-count"] == "3";
  })) << env.AgentLog();
  auto node = env.api()->GetNode(spec.name);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->status.allocatable["aliyun.com/gpu-count"], "3");
  EXPECT_EQ(node->status.capacity["cpu"], "64");  // a merge patch: kubelet's fields stay

  // A GPU goes bad: the annotation and the count follow, kubelet loses its 15 units.
  { std::ofstream(events, std::ios::app) << "xid=79 uuid=" << GpuUuidFor(1) << "\n"; }
  ASSERT_TRUE(WaitUntil([&] {
    ms::NodeInventory now = env.Inventory();
    return now.gpus.size() == 3 && !now.gpus[1].healthy;
  })) << env.AgentLog();
  EXPECT_TRUE(env.kubelet().WaitForAllocatable(kMem, 24 + 80, std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] {
    auto n = env.api()->GetNode(spec.name);
    return n.ok() && n->status.allocatable["aliyun.com/gpu-count"] == "2" &&
           n->status.capacity["aliyun.com/gpu-count"] == "3";
  }));

  // Units of the Unhealthy GPU are refused.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(GpuUuidFor(1) + "-_-0");
  v1beta1::AllocateResponse resp;
  grpc::Status bad = env.kubelet().RawAllocate(kMem, req, &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(bad.error_message(), HasSubstr("Unhealthy"));

  // Someone removes the annotation: it comes back.
  ASSERT_TRUE(
      env.api()
          ->PatchNodeAnnotations(spec.name, {{std::string(ms::kInventoryAnnotation), std::nullopt}})
          .ok());
  ASSERT_TRUE(WaitUntil([&] { return env.Inventory().gpus.size() == 3; })) << env.AgentLog();
  ms::NodeInventory back = env.Inventory();
  ASSERT_EQ(back.gpus.size(), 3u);
  EXPECT_FALSE(back.gpus[1].healthy);
}

TEST(NodeMemoryShares, SteersToTheAssumedGpuAndConfirms) {
  MemShareEnv env;
  env.Start();
  env.AddBoundPod(SimplePod("p", 3), {5}, 100);
  fakes::PodAdmission a = env.Admit("default", "p");
  ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();
  const fakes::Admission* adm = a.Find("main", kMem);
  ASSERT_NE(adm, nullptr);
  EXPECT_TRUE(adm->preferred_called);
  ASSERT_EQ(adm->device_ids.size(), 3u);
  for (const std::string& id : adm->device_ids) EXPECT_EQ(env.GpuOf(id), 5) << id;
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  EXPECT_EQ(Annotation(env, "p", "ALIYUN_COM_GPU_MEM_ASSIGNED"), "true");
  EXPECT_EQ(Annotation(env, "p", "ALIYUN_COM_GPU_MEM_IDX"), "5");
  EXPECT_EQ(Annotation(env, "p", "gpushare.io/gpu-mem-confirmed"), "{\"main\":5}");
  EXPECT_EQ(Annotation(env, "p", "ALIYUN_COM_GPU_MEM_ASSUME_TIME"),
            "100");  // the scheduler's stays
  auto records = env.kubelet().Allocations();
  ASSERT_EQ(records.size(), 1u);
  env.ExpectAllocateAnswer(records[0]);
  EXPECT_THAT(
      env.AgentLog(),
      HasSubstr(
          "event=memshare_preferred size=3 gpu=5 reason=planned pod=default/p container=main"));
}

// alibabacloud.com/gpu-milli on a real node: a fraction gets its milli of the planned GPU and
// that fraction of the GPU's memory as its limit; whole GPUs get every milli of the GPUs the
// scheduler planned whole, and no limit; both are confirmed in the pods' annotations.
TEST(NodeMemoryShares, MilliFractionsAndWholeGpusAreSteeredLimitedAndConfirmed) {
  MemShareEnv env;
  env.Start();
  ASSERT_TRUE(env.kubelet().WaitForAllocatable(kMilli, 8000, std::chrono::seconds(20)))
      << env.AgentLog();
  env.AddBoundPod(MilliPod("frac", 250), {5}, 100);
  env.AddBoundPod(MilliPod("whole", 2000), {2, 6}, 101);
  env.AddBoundPod(SimplePod("units", 3), {5}, 102);  // memory units on the fraction's GPU

  fakes::PodAdmission a = env.Admit("default", "frac");
  ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();
  const fakes::Admission* adm = a.Find("main", kMilli);
  ASSERT_NE(adm, nullptr);
  EXPECT_TRUE(adm->preferred_called);
  ASSERT_EQ(adm->device_ids.size(), 250u);
  for (const std::string& id : adm->device_ids) ASSERT_EQ(env.GpuOf(id), 5) << id;

  a = env.Admit("default", "whole");
  ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();
  adm = a.Find("main", kMilli);
  ASSERT_NE(adm, nullptr);
  ASSERT_EQ(adm->device_ids.size(), 2000u);
  std::map<int, int> per_gpu;
  for (const std::string& id : adm->device_ids) per_gpu[env.GpuOf(id)]++;
  EXPECT_EQ(per_gpu, (std::map<int, int>{{2, 1000}, {6, 1000}})) << env.AgentLog();

  a = env.Admit("default", "units");
  ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();

  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  EXPECT_EQ(Annotation(env, "frac", "ALIYUN_COM_GPU_MEM_ASSIGNED"), "true");
  EXPECT_EQ(Annotation(env, "frac", "gpushare.io/gpu-mem-confirmed"), "{\"main\":5}");
  EXPECT_EQ(Annotation(env, "frac", "ALIYUN_COM_GPU_MEM_POD"), "6");  // 250 of 24 units, up
  EXPECT_EQ(Annotation(env, "whole", "gpushare.io/gpu-mem-confirmed"), "{\"main\":2,\"main/1\":6}");

  // What Allocate answered: the fraction limited to 250/1000 of 24,576 MiB, whole GPUs not.
  std::map<std::string, const fakes::AllocationRecord*> by_pod;
  const auto records = env.kubelet().Allocations();
  for (const auto& r : records)
    if (r.resource == kMilli) by_pod[r.pod_name] = &r;
  ASSERT_EQ(by_pod.size(), 2u);
  const auto& frac = by_pod.at("frac")->response.envs();
  EXPECT_EQ(frac.at("NVIDIA_VISIBLE_DEVICES"), GpuUuidFor(5));
  EXPECT_EQ(frac.at("ALIYUN_COM_GPU_MEM_IDX"), "5");
  EXPECT_EQ(frac.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "6144m");
  const auto& whole = by_pod.at("whole")->response.envs();
  EXPECT_EQ(whole.at("NVIDIA_VISIBLE_DEVICES"), GpuUuidFor(2) + "," + GpuUuidFor(6));
  EXPECT_EQ(whole.at("ALIYUN_COM_GPU_MEM_IDX"), "2,6");
  EXPECT_EQ(whole.count("CUDA_DEVICE_MEMORY_LIMIT_0"), 0u);
  EXPECT_THAT(env.AgentLog(),
              HasSubstr("event=memshare_preferred size=250 gpu=5 reason=planned pod=default/frac "
                        "container=main"));
  EXPECT_THAT(env.AgentLog(), HasSubstr("event=memshare_preferred size=2000 gpu=2 reason=planned"));
}

TEST(NodeMemoryShares, ProportionalComputeLimitFollowsTheShareOfMemory) {
  NodeSpec spec;
  spec.gpu_mib = {24576, 81920};
  spec.memory_shares = "    devices: all\n    computeLimit: proportional\n";
  MemShareEnv env(spec);
  env.Start();
  env.AddBoundPod(SimplePod("small", 3), {0}, 100);
  env.AddBoundPod(SimplePod("big", 20), {1}, 101);
  for (const char* pod : {"small", "big"}) {
    fakes::PodAdmission a = env.Admit("default", pod);
    ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();
  }
  std::map<std::string, std::string> sm;
  for (const auto& r : env.kubelet().Allocations()) {
    const auto& e = r.response.envs();
    sm[r.pod_name] = e.count("CUDA_DEVICE_SM_LIMIT_0") ? e.at("CUDA_DEVICE_SM_LIMIT_0") : "<unset>";
  }
  EXPECT_EQ(sm["small"], "12");  // 3 of 24 GiB: 12.5% rounded down
  EXPECT_EQ(sm["big"], "25");    // 20 of 80 GiB
}

// A pod's compute share (ACK's aliyun.com/gpu-core.percentage, HAMi's nvidia.com/gpucores) is its
// container's SM limit, over the node's computeLimit policy; a fraction's too; a pod without one
// keeps the policy (none here). Kubelet names no pod: the share is that of the slot the advice
// served, and without the advice that of the pending pods asking that size first.
TEST(NodeMemoryShares, APodsComputeShareIsItsContainersSmLimit) {
  MemShareEnv env;
  env.Start();
  ASSERT_TRUE(env.kubelet().WaitForAllocatable(kMilli, 8000, std::chrono::seconds(20)))
      << env.AgentLog();
  env.AddBoundPod(WithCore(SimplePod("ack", 3), 30, "aliyun.com/gpu-core.percentage"), {0}, 100);
  env.AddBoundPod(WithCore(SimplePod("hami", 4), 45, "nvidia.com/gpucores"), {1}, 101);
  env.AddBoundPod(WithCore(MilliPod("frac", 250), 25, "aliyun.com/gpu-core.percentage"), {2}, 102);
  env.AddBoundPod(SimplePod("plain", 2), {0}, 103);
  for (const char* pod : {"plain", "frac", "hami", "ack"}) {
    fakes::PodAdmission a = env.Admit("default", pod);
    ASSERT_TRUE(a.admitted) << pod << ": " << a.error << env.AgentLog();
  }
  std::map<std::string, std::string> sm;
  for (const auto& r : env.kubelet().Allocations()) {
    const auto& e = r.response.envs();
    sm[r.pod_name] = e.count("CUDA_DEVICE_SM_LIMIT_0") ? e.at("CUDA_DEVICE_SM_LIMIT_0") : "<unset>";
  }
  EXPECT_EQ(sm["ack"], "30");
  EXPECT_EQ(sm["hami"], "45");
  EXPECT_EQ(sm["frac"], "25");
  EXPECT_EQ(sm["plain"], "<unset>");
  EXPECT_THAT(env.AgentLog(),
              HasSubstr("limit_mib=3072 compute_percent=30 resource=aliyun.com/gpu-mem"));
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();

  // Kubelet without the advice (a plain Allocate of five units of GPU 3): the pending pod that
  // asks five first has 20 %.
  env.AddBoundPod(WithCore(SimplePod("raw", 5), 20, "aliyun.com/gpu-core.percentage"), {3}, 104);
  v1beta1::AllocateRequest req;
  auto* container = req.add_container_requests();
  for (int j = 0; j < 5; ++j) container->add_devices_ids(GpuUuidFor(3) + "-_-" + std::to_string(j));
  v1beta1::AllocateResponse resp;
  grpc::Status st = env.kubelet().RawAllocate(kMem, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message() << env.AgentLog();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& envs = resp.container_responses(0).envs();
  ASSERT_TRUE(envs.count("CUDA_DEVICE_SM_LIMIT_0")) << env.AgentLog();
  EXPECT_EQ(envs.at("CUDA_DEVICE_SM_LIMIT_0"), "20");
  EXPECT_THAT(env.AgentLog(), HasSubstr("event=memshare_compute_unadvised size=5 gpu=3 "
                                        "compute_percent=20"));
}

TEST(NodeMemoryShares, IdenticalPodsAdmittedInTheOppositeOrderEndUpTrue) {
  MemShareEnv env;
  env.Start();
  // The scheduler bound a (older) to GPU 0 and b to GPU 1; kubelet admits b first. Allocate
  // cannot tell them apart, so b gets a's GPU; the reconciler writes what really happened.
  env.AddBoundPod(SimplePod("a", 3), {0}, 100);
  env.AddBoundPod(SimplePod("b", 3), {1}, 200);
  ASSERT_TRUE(env.Admit("default", "b").admitted);
  ASSERT_TRUE(env.Admit("default", "a").admitted);
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  auto truth = env.KubeletTruth();
  EXPECT_EQ(truth["default/b"]["main"], 0);
  EXPECT_EQ(truth["default/a"]["main"], 1);
  EXPECT_EQ(Annotation(env, "b", "ALIYUN_COM_GPU_MEM_IDX"), "0");
  EXPECT_EQ(Annotation(env, "a", "ALIYUN_COM_GPU_MEM_IDX"), "1");
  EXPECT_EQ(Annotation(env, "a", "gpushare.io/gpu-mem-assumed"),
            "{\"main\":0}");  // the guess stays readable
  EXPECT_THAT(env.AgentLog(), HasSubstr("corrected=true"));
  env.UnitsPerGpu();
}

TEST(NodeMemoryShares, SeveralContainersInitContainersAndSidecars) {
  MemShareEnv env;
  env.Start();
  // setup (init, 3) runs first on main's GPU 2; main (3) reuses setup's units; side (2) goes to
  // GPU 6; queue-proxy asks for nothing.
  env.AddBoundPod(
      PodJson("multi", {{"setup", 3, true}, {"main", 3}, {"side", 2}, {"queue-proxy", 0}},
              "default", "uid-multi"),
      {2, 6}, 100);
  fakes::PodAdmission a = env.Admit("default", "multi");
  ASSERT_TRUE(a.admitted) << a.error << env.AgentLog();
  ASSERT_EQ(a.steps.size(), 3u);
  EXPECT_EQ(a.steps[0].container, "setup");
  EXPECT_EQ(a.steps[1].container, "main");
  EXPECT_EQ(a.steps[1].admission.must_include.size(), 3u);  // reused from the init container
  EXPECT_FALSE(a.steps[1].admission.preferred_called);      // nothing left to choose
  for (const auto& s : a.steps) {
    for (const std::string& id : s.admission.device_ids) {
      EXPECT_EQ(env.GpuOf(id), s.container == "side" ? 6 : 2) << s.container << "\n"
                                                              << env.AgentLog();
    }
  }
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  EXPECT_EQ(Annotation(env, "multi", "gpushare.io/gpu-mem-confirmed"),
            "{\"main\":2,\"setup\":2,\"side\":6}");
  EXPECT_EQ(Annotation(env, "multi", "ALIYUN_COM_GPU_MEM_IDX"), "2");
  auto records = env.kubelet().Allocations();
  const fakes::AllocationRecord* side = Record(records, "multi", "side");
  ASSERT_NE(side, nullptr);
  env.ExpectAllocateAnswer(*side);

  // An init container larger than the first app container: kubelet hands its leftover unit to
  // the next container (as must_include), which therefore shares the init container's GPU;
  // the advice follows kubelet and the annotations say so.
  env.AddBoundPod(PodJson("leftover", {{"setup", 4, true}, {"main", 3}, {"side", 2}}, "default",
                          "uid-leftover"),
                  {3, 7}, 200);
  a = env.Admit("default", "leftover");
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.Find("side", kMem)->must_include.size(), 1u);
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front();
  EXPECT_EQ(Annotation(env, "leftover", "gpushare.io/gpu-mem-confirmed"),
            "{\"main\":3,\"setup\":3,\"side\":3}");
  EXPECT_EQ(env.UnitsPerGpu()[3], 5);  // max(3 + 2, 4): what memshare::GpuUsage counts for it
}

TEST(NodeMemoryShares, AgentRestartsKeepAllocationsAndFinishTheJob) {
  MemShareEnv env;
  env.Start();
  env.AddBoundPod(SimplePod("before", 3), {3}, 100);
  ASSERT_TRUE(env.Admit("default", "before").admitted);
  ASSERT_TRUE(env.WaitTruthful());
  // The API refuses pod patches for a while: the next pod is allocated, but not confirmed
  // before the agent is killed.
  json fault = {{"kind", "http"},
                {"count", 1000000},
                {"code", 500},
                {"method", "PATCH"},
                {"pathContains", "/pods/"}};
  ASSERT_TRUE(env.api()->Do({"POST", "/_fake/faults", fault.dump(), "application/json"}).ok());
  env.AddBoundPod(SimplePod("during", 5), {4}, 200);
  fakes::PodAdmission a = env.Admit("default", "during", /*set_status=*/false);
  ASSERT_TRUE(a.admitted) << a.error;
  ASSERT_TRUE(WaitUntil([&] {
    return env.AgentLog().find("event=memshare_confirm_failed pod=default/during") !=
           std::string::npos;
  })) << env.AgentLog();
  env.StopAgent(SIGKILL);
  ASSERT_TRUE(env.api()->Do({"DELETE", "/_fake/faults", "", ""}).ok());
  env.SetPhase("default", "during", a);
  EXPECT_EQ(Annotation(env, "during", "ALIYUN_COM_GPU_MEM_ASSIGNED"), "false");
  const auto before = env.kubelet().Allocations();

  // A new agent: kubelet's allocations are untouched, the missing confirmation is written,
  // and new pods are steered knowing what is already taken.
  env.StartAgent();
  env.WaitServing();
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  const auto after = env.kubelet().Allocations();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].device_ids, before[i].device_ids);
  env.AddBoundPod(SimplePod("after", 3), {3}, 300);
  ASSERT_TRUE(env.Admit("default", "after").admitted);
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front();
  EXPECT_EQ(env.KubeletTruth()["default/after"]["main"], 3);
  EXPECT_EQ(env.UnitsPerGpu()[3], 6);

  // SIGTERM: a clean exit, and a restarted agent changes nothing.
  env.StopAgent(SIGTERM);
  EXPECT_EQ(env.agent()->Wait(std::chrono::seconds(1)), 0);
  env.StartAgent();
  env.WaitServing();
  EXPECT_TRUE(env.Untruthful().empty());
  EXPECT_EQ(env.kubelet().Allocations().size(), 3u);
}

TEST(NodeMemoryShares, KubeletsRateLimitIsRespected) {
  NodeSpec spec;
  spec.gpu_mib = {24576, 24576};
  spec.kubelet.pod_resources_qps = 5;
  spec.kubelet.pod_resources_burst = 1;
  MemShareEnv env(spec);
  env.Start();
  for (int i = 0; i < 8; ++i) {
    env.AddBoundPod(SimplePod("r" + std::to_string(i), 2), {i % 2}, 100 + i);
    ASSERT_TRUE(env.Admit("default", "r" + std::to_string(i)).admitted);
  }
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  EXPECT_EQ(env.UnitsPerGpu(), (std::map<int, int64_t>{{0, 8}, {1, 8}}));
}

TEST(NodeMemoryShares, BadRequestsAreRefusedWithAReason) {
  NodeSpec spec;
  spec.gpu_mib = {24576, 24576};
  MemShareEnv env(spec);
  env.Start();
  auto allocate = [&](std::vector<std::string> ids) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    return env.kubelet().RawAllocate(kMem, req, &resp);
  };
  const std::string g0 = GpuUuidFor(0), g1 = GpuUuidFor(1);
  grpc::Status s = allocate({g0 + "-_-0", g0 + "-_-1", g1 + "-_-0"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("span 2 GPUs (GPU 0: 2 units, GPU 1: 1 unit)"));
  s = allocate({g0 + "-_-99"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("unknown device IDs"));
  s = allocate({});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = allocate({g0 + "-_-3", g0 + "-_-3"});
  EXPECT_THAT(s.error_message(), HasSubstr("more than once"));
  v1beta1::PreferredAllocationRequest preq;
  auto* pc = preq.add_container_requests();
  pc->add_available_deviceids(g0 + "-_-0");
  pc->set_allocation_size(0);
  v1beta1::PreferredAllocationResponse presp;
  s = env.kubelet().RawPreferred(kMem, preq, &presp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("allocation_size must be at least 1"));

  // A container larger than any GPU's free units: kubelet mixes GPUs, Allocate refuses, the
  // pod is rejected with the reason.
  env.AddBoundPod(SimplePod("big-0", 20), {0}, 1);
  ASSERT_TRUE(env.Admit("default", "big-0").admitted);
  env.AddBoundPod(SimplePod("big-1", 20), {1}, 2);
  ASSERT_TRUE(env.Admit("default", "big-1").admitted);
  env.AddBoundPod(SimplePod("too-big", 6), {0}, 3);  // 8 units free, but 4 per GPU
  fakes::PodAdmission a = env.Admit("default", "too-big");
  EXPECT_FALSE(a.admitted);
  EXPECT_THAT(a.error, HasSubstr("must come from one GPU"));
  auto pod = env.api()->GetPod("default", "too-big");
  EXPECT_EQ(pod->status.phase, "Failed");
  EXPECT_EQ(pod->status.reason, "UnexpectedAdmissionError");
  // A pod whose annotations are garbage is still confirmed from kubelet's records.
  json odd = SimplePod("odd", 1);
  odd["spec"]["nodeName"] = spec.name;
  odd["metadata"]["annotations"] = {{"ALIYUN_COM_GPU_MEM_IDX", "x"},
                                    {"gpushare.io/gpu-mem-assumed", "{"}};
  ASSERT_TRUE(env.api()->Create(kube::kPods, "default", odd).ok());
  ASSERT_TRUE(env.Admit("default", "odd").admitted);
  ASSERT_TRUE(env.WaitTruthful()) << env.Untruthful().front() << env.AgentLog();
  EXPECT_TRUE(env.agent()->Running());
  env.UnitsPerGpu();
}

// The kubelet double's PodResources service itself, as the agent sees it (kubernetes-protocols.md
// §2).
TEST(NodeMemoryShares, TheKubeletDoubleReportsPodResourcesAsKubeletDoes) {
  NodeSpec spec;
  spec.gpu_mib = {4096, 4096};
  spec.kubelet.pod_resources_qps = 20;  // so that the burst below is refused on any machine
  spec.kubelet.pod_resources_burst = 3;
  MemShareEnv env(spec);
  env.Start();
  env.AddBoundPod(PodJson("kn", {{"setup", 2, true}, {"user-container", 2}, {"queue-proxy", 0}},
                          "default", "uid-kn"),
                  {1}, 1);
  ASSERT_TRUE(env.Admit("default", "kn").admitted);
  auto channel = grpc::CreateChannel("unix:" + env.dir() + "/pr/kubelet.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = ::v1::PodResourcesLister::NewStub(channel);
  // A client waits when kubelet's limiter refuses (the agent shares the budget).
  auto call = [](const std::function<grpc::Status(grpc::ClientContext*)>& f) {
    for (;;) {
      grpc::ClientContext ctx;
      grpc::Status s = f(&ctx);
      if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
  };
  ::v1::ListPodResourcesResponse list;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return stub->List(c, {}, &list); }).ok());
  ASSERT_EQ(list.pod_resources_size(), 1);
  const auto& pod = list.pod_resources(0);
  EXPECT_EQ(pod.name(), "kn");
  EXPECT_EQ(pod.namespace_(), "default");
  ASSERT_EQ(pod.containers_size(),
            2);  // app containers in spec order; the init container is not listed
  EXPECT_EQ(pod.containers(0).name(), "user-container");
  EXPECT_EQ(pod.containers(1).name(), "queue-proxy");
  EXPECT_EQ(pod.containers(1).devices_size(), 0);
  ASSERT_EQ(pod.containers(0).devices_size(), 2);  // one entry per device
  for (const auto& d : pod.containers(0).devices()) {
    EXPECT_EQ(d.resource_name(), kMem);
    ASSERT_EQ(d.device_ids_size(), 1);
    EXPECT_EQ(env.GpuOf(d.device_ids(0)), 1);
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), 1);  // GPU 1's NUMA node
  }
  ::v1::AllocatableResourcesResponse alloc;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) {
                return stub->GetAllocatableResources(c, {}, &alloc);
              }).ok());
  int units = 0;
  for (const auto& d : alloc.devices()) units += d.resource_name() == kMem;
  EXPECT_EQ(units, 8);  // healthy devices, allocated ones included (milli devices apart)
  ::v1::GetPodResourcesRequest get;
  get.set_pod_name("ghost");
  get.set_pod_namespace("default");
  ::v1::GetPodResourcesResponse got;
  grpc::Status s = call([&](grpc::ClientContext* c) { return stub->Get(c, get, &got); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(s.error_message(), "pod ghost not found in namespace default");
  get.set_pod_name("kn");
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return stub->Get(c, get, &got); }).ok());
  EXPECT_EQ(got.pod_resources().containers(0).devices_size(), 2);
  // Beyond the burst: kubelet's rate limit.
  int limited = 0;
  for (int i = 0; i < 10; ++i) {
    grpc::ClientContext ctx;
    ::v1::ListPodResourcesResponse r;
    grpc::Status s = stub->List(&ctx, {}, &r);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_EQ(s.error_message(), "rejected by rate limit");
      ++limited;
    }
  }
  EXPECT_GT(limited, 0);
  EXPECT_GT(env.kubelet().pod_resources_rate_limited(), 0u);
}

TEST(NodeMemoryShares, StartupProblemsExitWithTheFlagNamed) {
  MemShareEnv env;
  env.StartApi();
  env.WriteInputs();
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::NodeBinary(),
                                     "--inventory",
                                     env.dir() + "/inventory.yaml",
                                     "--config",
                                     env.dir() + "/config.yaml",
                                     "--device-plugin-dir",
                                     env.dir() + "/dp2"};
    argv.insert(argv.end(), args.begin(), args.end());
    return gpushare::testing::RunProcess(argv, {{"NODE_NAME", ""}, {"KUBECONFIG", ""}});
  };
  auto r = run({"--kubeconfig", env.kubeconfig()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(
      r.err,
      HasSubstr("--node-name (or NODE_NAME): required when gpushare.memoryShares selects GPUs"));
  r = run({"--node-name", "n", "--kubeconfig", env.dir() + "/missing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("memory shares need the Kubernetes API"));
  r = run({"--node-name", "n", "--kubeconfig", env.kubeconfig(), "--reconcile-interval", "soon"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--reconcile-interval: must be a positive duration"));
}

}  // namespace
}  // namespace gpushare::e2e
