// The memory-share contract: inventory annotation, device IDs, requests, assignments.
#include "core/memshare.h"

#include <gtest/gtest.h>

#include "kube/memshare_pod.h"

namespace gpushare::memshare {
namespace {

NodeInventory EightA10() {
  NodeInventory inv;
  for (int i = 0; i < 8; ++i) {
    InventoryGpu g;
    g.index = i;
    g.uuid = "GPU-0000000" + std::to_string(i);
    g.model = "NVIDIA A10";
    g.memory_mib = 24576;
    g.units = 24;
    inv.gpus.push_back(g);
  }
  return inv;
}

TEST(MemshareUnits, NamesAndRounding) {
  EXPECT_EQ(MemoryUnitName(MemoryUnit::kGiB), "GiB");
  EXPECT_EQ(*ParseMemoryUnit("MiB"), MemoryUnit::kMiB);
  EXPECT_FALSE(ParseMemoryUnit("gib").has_value());
  EXPECT_EQ(UnitsForMemory(16160, MemoryUnit::kGiB), 15);  // a "16 GB" card shows 15 GiB
  EXPECT_EQ(UnitsForMemory(16160, MemoryUnit::kMiB), 16160);
  EXPECT_EQ(UnitsForMemory(-1, MemoryUnit::kGiB), 0);
}

TEST(MemshareDeviceIds, RoundTripAndErrors) {
  const std::string id = UnitDeviceId("GPU-abc-def", 17);
  EXPECT_EQ(id, "GPU-abc-def-_-17");
  Result<UnitId> u = ParseUnitDeviceId(id);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->gpu_uuid, "GPU-abc-def");
  EXPECT_EQ(u->j, 17);
  EXPECT_FALSE(ParseUnitDeviceId("GPU-abc::3").ok());
  EXPECT_FALSE(ParseUnitDeviceId("-_-3").ok());
  EXPECT_FALSE(ParseUnitDeviceId("GPU-a-_-").ok());
  EXPECT_FALSE(ParseUnitDeviceId("GPU-a-_-03").ok());
  EXPECT_FALSE(ParseUnitDeviceId("GPU-a-_--3").ok());
  EXPECT_NE(ParseUnitDeviceId("x").status().message().find("\"x\""), std::string::npos);
}

TEST(MemshareInventory, RoundTrip) {
  NodeInventory inv = EightA10();
  inv.gpus[3].healthy = false;
  inv.gpus[5].mode = "time-slicing";
  inv.gpus[1].model = "quote\" back\\slash \x01";
  const std::string text = EncodeInventory(inv);
  EXPECT_EQ(
      text.rfind("{\"version\":1,\"unit\":\"GiB\",\"maxClientsPerGpu\":48,\"gpus\":[{\"index\":0,",
                 0),
      0u)
      << text;
  Result<NodeInventory> back = DecodeInventory(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->gpus.size(), 8u);
  EXPECT_EQ(back->gpus[1].model, inv.gpus[1].model);
  EXPECT_FALSE(back->gpus[3].healthy);
  EXPECT_FALSE(back->gpus[3].ServesMemoryShares());
  EXPECT_FALSE(back->gpus[5].ServesMemoryShares());
  EXPECT_TRUE(back->gpus[0].ServesMemoryShares());
  EXPECT_EQ(back->gpus[7].units, 24);
  EXPECT_EQ(EncodeInventory(*back), text);
  EXPECT_EQ(back->FindByUuid("GPU-00000002")->index, 2);
  EXPECT_EQ(back->FindByIndex(9), nullptr);
}

TEST(MemshareInventory, TolerantOfUnknownKeysAndOrder) {
  Result<NodeInventory> inv = DecodeInventory(
      R"({"gpus":[{"uuid":"GPU-b","index":1,"units":40,"memoryMiB":40960,"future":[1,{"x":null}]},
                   {"index":0,"uuid":"GPU-a","units":10,"memoryMiB":10240,"health":"Unhealthy"}],
          "unit":"GiB","version":1,"extra":{"a":"\u00e9\ud83d\ude00"}})");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-a");   // sorted by index
  EXPECT_EQ(inv->gpus[1].mode, "memory");  // default
  EXPECT_EQ(inv->max_clients_per_gpu, 48);
}

TEST(MemshareInventory, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {"", "unexpected end"},
      {"[]", "must be a JSON object"},
      {R"({"unit":"GiB","gpus":[]})", "version: missing"},
      {R"({"version":2,"unit":"GiB","gpus":[]})", "newer gpushare-node"},
      {R"({"version":1,"unit":"KiB","gpus":[]})", "unit: must be"},
      {R"({"version":1,"unit":"GiB"})", "gpus: missing"},
      {R"({"version":1,"unit":"GiB","gpus":{}})", "gpus: must be an array"},
      {R"({"version":1,"unit":"GiB","gpus":[1]})", "gpus[0]: must be an object"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":"x"}]})",
       "gpus[0].units"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":-1}]})",
       "gpus[0].units"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":1.5}]})",
       "gpus[0].units"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":1},{"index":0,"uuid":"b","memoryMiB":1,"units":1}]})",
       "gpus[1].index: 0 appears twice"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":1},{"index":1,"uuid":"a","memoryMiB":1,"units":1}]})",
       "gpus[1].uuid"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"a","memoryMiB":1,"units":1,"health":"ok"}]})",
       "health"},
      {R"({"version":1,"unit":"GiB","gpus":[{"index":0,"uuid":"","memoryMiB":1,"units":1}]})",
       "uuid: must not be empty"},
      {R"({"version":1,"version":1,"unit":"GiB","gpus":[]})", "duplicate key"},
      {R"({"version":1,"unit":"GiB","gpus":[]} x)", "unexpected data"},
      {R"({"version":1,"unit":"GiB","gpus":[],})", "expected a string key"},
      {R"({"version":1,"unit":"G\iB","gpus":[]})", "invalid escape"},
      {R"({"version":1,"unit":"\ud800","gpus":[]})", "surrogate"},
      {"{\"version\":1,\"unit\":\"G\x01\",\"gpus\":[]}", "control character"},
      {R"({"version":99999999999999999999,"unit":"GiB","gpus":[]})", "version: must be an integer"},
  };
  for (const Case& c : cases) {
    Result<NodeInventory> r = DecodeInventory(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.json << " -> " << r.status().message();
  }
  std::string deep(100, '[');
  EXPECT_NE(DecodeInventory(deep).status().message().find("nesting"), std::string::npos);
  std::string huge = "\"" + std::string(2 << 20, 'a') + "\"";
  EXPECT_FALSE(DecodeInventory(huge).ok());
  // Truncations of a valid document never crash and never succeed.
  const std::string good = EncodeInventory(EightA10());
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(DecodeInventory(good.substr(0, n)).ok()) << n;
}

TEST(MemshareRequest, LimitsWinSidecarsIgnoredInitFolded) {
  Result<PodRequest> r = ComputePodRequest({{"setup", true, 5, std::nullopt},
                                            {"user-container", false, 3, 3},
                                            {"queue-proxy", false, std::nullopt, std::nullopt},
                                            {"second", false, std::nullopt, 2},
                                            {"zero", false, 0, std::nullopt}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->app.size(), 2u);
  EXPECT_EQ(r->app[1].name, "second");
  EXPECT_EQ(r->app[1].units, 2);
  EXPECT_EQ(r->PodUnits(), 5);
  EXPECT_EQ(r->Demands(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(r->DemandContainers(), (std::vector<std::string>{"user-container", "second"}));
  Result<PodRequest> init_only =
      ComputePodRequest({{"a", true, 2, std::nullopt}, {"b", true, 4, std::nullopt}});
  ASSERT_TRUE(init_only.ok());
  EXPECT_EQ(init_only->Demands(), (std::vector<int64_t>{4}));
  EXPECT_EQ(init_only->DemandContainers(), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(ComputePodRequest({{"q", false, std::nullopt, std::nullopt}})->empty());
  EXPECT_NE(ComputePodRequest({{"c", false, 3, 2}}).status().message().find("differs from limit"),
            std::string::npos);
  EXPECT_NE(ComputePodRequest({{"c", false, -3, std::nullopt}}).status().message().find("negative"),
            std::string::npos);
  EXPECT_NE(ComputePodRequest({{"c", false, 1, 1}, {"c", true, 1, 1}})
                .status()
                .message()
                .find("duplicate"),
            std::string::npos);
}

TEST(MemshareAssignment, BindAnnotationsResolveAsAssumed) {
  PodRequest req =
      *ComputePodRequest({{"init", true, 4, std::nullopt}, {"a", false, 3, 3}, {"b", false, 2, 2}});
  auto ann = BindAnnotations(req, {5, 2}, 24, 1700000000123456789);
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_IDX"), "5");
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_POD"), "5");
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_DEV"), "24");
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "false");
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_ASSUME_TIME"), "1700000000123456789");
  EXPECT_EQ(ann.at("gpushare.io/gpu-mem-assumed"), R"({"a":5,"b":2,"init":5})");
  PodAssignment a = ResolveAssignment(ann, req);
  EXPECT_EQ(a.state, AssignmentState::kAssumed);
  EXPECT_EQ(a.gpus, (ContainerGpus{{"a", 5}, {"b", 2}, {"init", 5}}));
  EXPECT_EQ(*a.assume_time, 1700000000123456789);
  EXPECT_TRUE(a.problems.empty());
  auto use = GpuUsage(req, a.gpus);
  EXPECT_EQ(use[5].units, 4);  // max(3, init 4)
  EXPECT_EQ(use[5].clients, 1);
  EXPECT_EQ(use[2].units, 2);
  // The node agent confirms a swap: the truth wins.
  auto confirmed = ConfirmAnnotations(req, {{"a", 1}, {"b", 2}, {"init", 1}});
  for (const auto& [k, v] : confirmed) ann[k] = v;
  a = ResolveAssignment(ann, req);
  EXPECT_EQ(a.state, AssignmentState::kConfirmed);
  EXPECT_EQ(ann.at("ALIYUN_COM_GPU_MEM_IDX"), "1");
  EXPECT_EQ(a.gpus.at("a"), 1);
}

TEST(MemshareAssignment, AlibabaOnlyAndBrokenAnnotations) {
  PodRequest req = *ComputePodRequest({{"main", false, 3, 3}});
  PodAssignment a = ResolveAssignment(
      {{"ALIYUN_COM_GPU_MEM_IDX", "3"}, {"ALIYUN_COM_GPU_MEM_ASSIGNED", "true"}}, req);
  EXPECT_EQ(a.state, AssignmentState::kConfirmed);
  EXPECT_EQ(a.gpus.at("main"), 3);
  a = ResolveAssignment({{"ALIYUN_COM_GPU_MEM_IDX", "3"}, {"ALIYUN_COM_GPU_MEM_ASSIGNED", "false"}},
                        req);
  EXPECT_EQ(a.state, AssignmentState::kAssumed);
  a = ResolveAssignment({}, req);
  EXPECT_EQ(a.state, AssignmentState::kNone);
  EXPECT_TRUE(a.problems.empty());
  a = ResolveAssignment({{"gpushare.io/gpu-mem-assumed", "{\"main\":"},
                         {"ALIYUN_COM_GPU_MEM_IDX", "x"},
                         {"ALIYUN_COM_GPU_MEM_ASSUME_TIME", "soon"}},
                        req);
  EXPECT_EQ(a.state, AssignmentState::kNone);
  EXPECT_EQ(a.problems.size(), 4u);
  // A container missing from the map falls back to IDX.
  PodRequest two = *ComputePodRequest({{"a", false, 1, 1}, {"b", false, 1, 1}});
  a = ResolveAssignment(
      {{"gpushare.io/gpu-mem-assumed", R"({"a":1})"}, {"ALIYUN_COM_GPU_MEM_IDX", "0"}}, two);
  EXPECT_EQ(a.state, AssignmentState::kAssumed);
  EXPECT_EQ(a.gpus, (ContainerGpus{{"a", 1}, {"b", 0}}));
  EXPECT_FALSE(DecodeContainerGpus(R"({"a":-1})").ok());
  EXPECT_FALSE(DecodeContainerGpus(R"({"a":"1"})").ok());
  EXPECT_FALSE(DecodeContainerGpus("[]").ok());
  EXPECT_FALSE(DecodeAssumeTime("-5").has_value());
  EXPECT_EQ(EncodeContainerGpus({{"we\"ird", 2}}), R"({"we\"ird":2})");
  EXPECT_EQ(DecodeContainerGpus(EncodeContainerGpus({{"we\"ird", 2}}))->at("we\"ird"), 2);
}

// ACK's later annotations (scheduler.framework.gpushare.*), written beside Alibaba's first ones
// so that ACK-era tooling reads our pods: each app container's units per GPU by its index in
// spec.containers, "assigned" false at bind and true once gpushare-node confirmed.
TEST(MemshareAssignment, AckAnnotationsAreWrittenAtBindAndConfirmation) {
  // spec.containers: [queue-proxy (no share), user-container (3), second (2)].
  PodRequest req = *ComputePodRequest({{"setup", true, 4, std::nullopt},
                                       {"queue-proxy", false, std::nullopt, std::nullopt},
                                       {"user-container", false, 3, 3},
                                       {"second", false, 2, 2}});
  auto ann = BindAnnotations(req, {5, 2}, 24, 1700000000123456789);
  EXPECT_EQ(ann.at("scheduler.framework.gpushare.allocation"), R"({"1":{"5":3},"2":{"2":2}})");
  EXPECT_EQ(ann.at("scheduler.framework.gpushare.assigned"), "false");
  EXPECT_EQ(ann.at("scheduler.framework.gpushare.assume-time"), "1700000000123456789");
  auto confirmed = ConfirmAnnotations(req, {{"user-container", 1}, {"second", 2}, {"setup", 1}});
  EXPECT_EQ(confirmed.at("scheduler.framework.gpushare.allocation"),
            R"({"1":{"1":3},"2":{"2":2}})");
  EXPECT_EQ(confirmed.at("scheduler.framework.gpushare.assigned"), "true");
  // Two containers on one GPU stay two entries; whole GPUs: one entry per GPU.
  EXPECT_EQ(EncodeAckAllocation(req, {{"user-container", 0}, {"second", 0}}),
            R"({"1":{"0":3},"2":{"0":2}})");
  ContainerUnits whole;
  whole.name = "main";
  whole.milli_limit = 2000;
  const PodRequest two_gpus = *ComputePodRequest({whole})->Resolve(24);
  EXPECT_EQ(EncodeAckAllocation(two_gpus, AssignContainers(two_gpus, {3, 6})),
            R"({"0":{"3":24,"6":24}})");
  EXPECT_EQ(*DecodeAckAllocation(R"({"0":{"6":24,"3":24}})", two_gpus),
            (ContainerGpus{{"main", 3}, {"main/1", 6}}));
}

// A pod ACK's scheduler placed (only its annotations) is read where it is.
TEST(MemshareAssignment, AckOnlyAnnotationsAreRead) {
  PodRequest req = *ComputePodRequest(
      {{"sidecar", false, std::nullopt, std::nullopt}, {"a", false, 1, 1}, {"b", false, 7, 7}});
  PodAssignment a = ResolveAssignment(
      {{"scheduler.framework.gpushare.allocation", R"({"1":{"1":1},"2":{"0":7}})"},
       {"scheduler.framework.gpushare.assigned", "true"}},
      req);
  EXPECT_EQ(a.state, AssignmentState::kConfirmed);
  EXPECT_EQ(a.gpus, (ContainerGpus{{"a", 1}, {"b", 0}}));
  EXPECT_TRUE(a.problems.empty());
  a = ResolveAssignment(
      {{"scheduler.framework.gpushare.allocation", R"({"1":{"1":1},"2":{"0":7}})"},
       {"scheduler.framework.gpushare.assigned", "false"}},
      req);
  EXPECT_EQ(a.state, AssignmentState::kAssumed);
  // gpushare's own maps win over ACK's.
  a = ResolveAssignment(
      {{"scheduler.framework.gpushare.allocation", R"({"1":{"1":1},"2":{"0":7}})"},
       {"gpushare.io/gpu-mem-confirmed", R"({"a":3,"b":3})"}},
      req);
  EXPECT_EQ(a.gpus, (ContainerGpus{{"a", 3}, {"b", 3}}));
  // Unreadable: a problem naming the key, and no location.
  for (const char* bad :
       {"[]", R"({"x":{"0":1}})", R"({"1":{"gpu":1}})", R"({"1":{"0":-1}})", R"({"1":7})", "{"}) {
    a = ResolveAssignment({{"scheduler.framework.gpushare.allocation", bad}}, req);
    EXPECT_EQ(a.state, AssignmentState::kNone) << bad;
    ASSERT_FALSE(a.problems.empty()) << bad;
    EXPECT_EQ(a.problems[0].rfind("scheduler.framework.gpushare.allocation: ", 0), 0u)
        << a.problems[0];
  }
}

TEST(MemsharePod, FromKubePod) {
  kube::Pod p;
  p.metadata.name = "helloworld";
  p.metadata.namespace_ = "default";
  kube::Container user;
  user.name = "user-container";
  user.resources.limits["aliyun.com/gpu-mem"] = "3";
  kube::Container proxy;
  proxy.name = "queue-proxy";
  proxy.resources.requests["cpu"] = "25m";
  p.spec.containers = {user, proxy};
  Result<PodRequest> r = kube::PodMemRequest(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->app.size(), 1u);
  EXPECT_EQ(r->app[0].units, 3);
  p.spec.containers[0].resources.requests["aliyun.com/gpu-mem"] = "2";
  EXPECT_NE(kube::PodMemRequest(p).status().message().find(
                "pod default/helloworld: container \"user-container\""),
            std::string::npos);
  p.spec.containers[0].resources.requests.clear();
  p.spec.containers[0].resources.limits["aliyun.com/gpu-mem"] = "1.5";
  EXPECT_NE(kube::PodMemRequest(p).status().message().find(
                "spec.containers[0].resources.limits[aliyun.com/gpu-mem]"),
            std::string::npos);
  p.spec.containers[0].resources.limits["aliyun.com/gpu-mem"] = "3k";
  EXPECT_EQ(kube::PodMemRequest(p)->app[0].units, 3000);
}

// Compute shares: ACK's aliyun.com/gpu-core.percentage or HAMi's nvidia.com/gpucores on a
// container with a memory share or a fraction, 1..100; bad combinations are errors naming the
// container and the field; a compute share alone is not gpushare's pod (HAMi's, with
// nvidia.com/gpu) unless the pod asks shares elsewhere.
TEST(MemsharePod, ComputeShares) {
  auto pod = [](std::map<std::string, std::string> main,
                std::map<std::string, std::string> side = {}) {
    kube::Pod p;
    p.metadata.name = "infer";
    p.metadata.namespace_ = "ml";
    kube::Container c;
    c.name = "main";
    c.resources.limits = std::move(main);
    kube::Container s;
    s.name = "side";
    s.resources.limits = std::move(side);
    p.spec.containers = {c, s};
    return p;
  };
  auto error = [](const kube::Pod& p) { return kube::PodGpuRequest(p).status().message(); };
  Result<PodRequest> r = kube::PodGpuRequest(
      pod({{"aliyun.com/gpu-mem", "3"}, {"aliyun.com/gpu-core.percentage", "30"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->app[0].core, 30);
  EXPECT_EQ(r->CoreSum(), 30);
  r = kube::PodGpuRequest(
      pod({{"aliyun.com/gpu-mem", "3"}, {"nvidia.com/gpucores", "45"}},
          {{"aliyun.com/gpu-mem", "2"}, {"aliyun.com/gpu-core.percentage", "5"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->app[0].core, 45);
  EXPECT_EQ(r->app[1].core, 5);
  EXPECT_EQ(r->CoreSum(), 50);
  // A fraction carries its share through the resolution against a node.
  r = kube::PodGpuRequest(
      pod({{std::string(kMilliResource), "250"}, {"nvidia.com/gpucores", "25"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->Resolve(24)->app[0].core, 25);
  // Both spellings: they must agree.
  EXPECT_TRUE(kube::PodGpuRequest(pod({{"aliyun.com/gpu-mem", "3"},
                                       {"aliyun.com/gpu-core.percentage", "30"},
                                       {"nvidia.com/gpucores", "30"}}))
                  .ok());
  EXPECT_EQ(error(pod({{"aliyun.com/gpu-mem", "3"},
                       {"aliyun.com/gpu-core.percentage", "30"},
                       {"nvidia.com/gpucores", "40"}})),
            "pod ml/infer: container \"main\": aliyun.com/gpu-core.percentage 30 and "
            "nvidia.com/gpucores 40 disagree (give one of the two)");
  EXPECT_EQ(error(pod({{"aliyun.com/gpu-mem", "3"}, {"aliyun.com/gpu-core.percentage", "150"}})),
            "pod ml/infer: container \"main\": aliyun.com/gpu-core.percentage 150 is above 100 "
            "(percent of one GPU's compute)");
  EXPECT_NE(error(pod({{"aliyun.com/gpu-mem", "3"}, {"nvidia.com/gpucores", "0.5"}}))
                .find("spec.containers[0].resources.limits[nvidia.com/gpucores]"),
            std::string::npos);
  EXPECT_EQ(
      error(pod({{std::string(kMilliResource), "1000"}, {"aliyun.com/gpu-core.percentage", "50"}})),
      "pod ml/infer: container \"main\": aliyun.com/gpu-core.percentage with whole GPUs "
      "(alibabacloud.com/gpu-milli 1000): a whole GPU is not compute-limited; ask a fraction");
  EXPECT_EQ(error(pod({{"aliyun.com/gpu-mem", "3"}}, {{"aliyun.com/gpu-core.percentage", "20"}})),
            "pod ml/infer: container \"side\": aliyun.com/gpu-core.percentage needs a memory share "
            "in the same container (aliyun.com/gpu-mem, or a fraction of "
            "alibabacloud.com/gpu-milli)");
  // Two containers of one size with other shares: the node could not tell them apart.
  EXPECT_EQ(error(pod({{"aliyun.com/gpu-mem", "3"}, {"aliyun.com/gpu-core.percentage", "30"}},
                      {{"aliyun.com/gpu-mem", "3"}})),
            "pod ml/infer: containers \"main\" and \"side\" ask the same aliyun.com/gpu-mem with "
            "other compute shares (30% and 0%): gpushare-node could not tell them apart; give them "
            "the same share or other sizes");
  EXPECT_TRUE(kube::PodGpuRequest(pod({{"aliyun.com/gpu-mem", "3"}, {"nvidia.com/gpucores", "30"}},
                                      {{"aliyun.com/gpu-mem", "3"}, {"nvidia.com/gpucores", "30"}}))
                  .ok());
  // HAMi's pod (nvidia.com/gpu with nvidia.com/gpucores) asks no share: not ours, no error.
  r = kube::PodGpuRequest(pod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty());
  // An init container with GPU memory: the node could not tell its first request apart.
  kube::Pod init = pod({{"aliyun.com/gpu-mem", "3"}, {"aliyun.com/gpu-core.percentage", "30"}});
  kube::Container setup;
  setup.name = "setup";
  setup.resources.limits["aliyun.com/gpu-mem"] = "2";
  init.spec.init_containers = {setup};
  EXPECT_NE(error(init).find("init container \"setup\" asks aliyun.com/gpu-mem in a pod with a "
                             "compute share"),
            std::string::npos)
      << error(init);
  init.spec.init_containers[0].resources.limits = {{"aliyun.com/gpu-core.percentage", "30"}};
  EXPECT_EQ(error(init),
            "pod ml/infer: init container \"setup\": aliyun.com/gpu-core.percentage is for app "
            "containers only");
}

TEST(MemshareUsage, ComputeSharesAddUpPerGpu) {
  PodRequest r;
  r.app = {{"a", 3, 0, false, 0, 30}, {"b", 2, 0, false, 1, 20}, {"c", 1, 0, false, 2, 0}};
  const std::map<int, GpuUse> use = GpuUsage(r, {{"a", 0}, {"b", 0}, {"c", 1}});
  EXPECT_EQ(use.at(0).core, 50);
  EXPECT_EQ(use.at(0).units, 5);
  EXPECT_EQ(use.at(1).core, 0);
}

}  // namespace
}  // namespace gpushare::memshare
