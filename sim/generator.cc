#include "sim/generator.h"

#include <cmath>
#include <cstdio>

#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "core/placement/rng.h"
#include "sim/experiment.h"

namespace gpushare::sim {
namespace {

using placement::Rng;

struct NodeType {
  const char* model;
  int64_t gpu_mib;  // memory per GPU (MiB), from NVIDIA's specifications
  int gpus;
  int64_t cpu_milli;
  int64_t memory_mib;
  double weight;
};

// Weights follow the trace's node mix (G2 45%, T4 33%, P100 11%, V100 7%, others).
const NodeType kNodeTypes[] = {
    {"A100-80GB", 81251, 8, 128000, 1048576, 0.45}, {"T4", 15109, 2, 104000, 524288, 0.33},
    {"P100", 16280, 2, 16000, 122880, 0.10},        {"V100-32GB", 32510, 8, 80000, 524288, 0.04},
    {"V100-16GB", 16160, 4, 32000, 131072, 0.05},   {"A10", 22731, 1, 32000, 262144, 0.03},
};

template <typename T, size_t N>
const T& Pick(const T (&items)[N], Rng& rng, double (*weight)(const T&)) {
  double total = 0;
  for (const auto& i : items) total += weight(i);
  double x = rng.UniformDouble() * total;
  for (const auto& i : items) {
    x -= weight(i);
    if (x < 0) return i;
  }
  return items[N - 1];
}

struct Choice {
  double value;
  double weight;
};
double WeightOf(const Choice& c) {
  return c.weight;
}
double NodeWeight(const NodeType& t) {
  return t.weight;
}

// The trace's sharing sizes (milli-GPU) with their frequencies, and CPU sizes (milli-cores).
const Choice kShareMilli[] = {{810, 35},  {470, 24},  {650, 8},   {320, 11},  {230, 4.5},
                              {460, 4.2}, {590, 2.4}, {550, 2.3}, {160, 2.4}, {370, 1.5},
                              {220, 2.0}, {110, 0.8}, {50, 0.3}};
const Choice kShareCpu[] = {{3150, 40}, {11910, 20}, {8000, 15}, {4000, 15}, {6000, 5}, {4150, 5}};
const Choice kWholeCpu[] = {{11300, 22}, {11400, 15}, {3150, 12}, {12000, 8},
                            {18710, 6},  {9810, 5},   {8000, 4},  {4000, 4},
                            {15700, 4},  {16000, 4},  {14200, 2}, {24200, 2}};
const Choice kCpuOnly[] = {{12500, 34}, {32000, 27}, {8000, 17}, {15400, 11}, {16500, 9}};
const Choice kMultiGpu[] = {{2, 16}, {4, 15}, {8, 44}};

struct PodKind {
  const char* name;
  double weight;  // share of pods
};
const PodKind kKinds[] = {{"cpu-only", 0.13},     {"trace-share", 0.25},
                          {"knative-3gib", 0.14}, {"vllm-timesliced", 0.07},
                          {"whole-1", 0.36},      {"knative-dedicated", 0.03},
                          {"whole-multi", 0.02}};
double KindWeight(const PodKind& k) {
  return k.weight;
}

}  // namespace

Workload GenerateDefaultWorkload(const GeneratorOptions& o) {
  Rng rng(o.seed);
  Workload w;
  w.name = "built-in default";
  int64_t capacity = 0;
  int gpus = 0;
  for (int i = 0; i < o.nodes; ++i) {
    const NodeType& t = Pick(kNodeTypes, rng, NodeWeight);
    placement::NodeSpec n;
    char name[32];
    std::snprintf(name, sizeof name, "node-%04d", i);
    n.name = name;
    n.cpu_milli = t.cpu_milli;
    n.memory_mib = t.memory_mib;
    n.gpu_model = t.model;
    n.gpu_capacity.assign(static_cast<size_t>(t.gpus), t.gpu_mib);
    capacity += t.gpu_mib * t.gpus;
    gpus += t.gpus;
    w.nodes.push_back(std::move(n));
  }
  w.gpu_unit = gpus > 0 ? capacity / gpus : 1;
  const double target = o.load * static_cast<double>(capacity);
  double demand = 0;
  int index = 0;
  auto add = [&](int64_t cpu, int64_t mem, int num_gpu, int64_t share_mib, bool whole) {
    TracePod p;
    char name[32];
    std::snprintf(name, sizeof name, "pod-%05d", index++);
    p.name = name;
    p.num_gpu = num_gpu;
    p.gpu_milli = whole ? w.gpu_unit : share_mib;  // the protocol's arrival accounting
    p.request.cpu_milli = cpu;
    p.request.memory_mib = mem;
    for (int g = 0; g < num_gpu; ++g) {
      placement::GpuDemand d;
      d.whole = whole;
      d.share = whole ? 0 : share_mib;
      p.request.gpus.push_back(d);
    }
    p.creation_time = index * 60;
    p.deletion_time = index * 60 + 3600 + static_cast<int64_t>(rng.Uniform(48 * 3600));
    demand += static_cast<double>(p.gpu_demand());
    w.pods.push_back(std::move(p));
  };
  while (demand < target) {
    const PodKind& k = Pick(kKinds, rng, KindWeight);
    const std::string kind = k.name;
    if (kind == "cpu-only") {
      const auto cpu = static_cast<int64_t>(Pick(kCpuOnly, rng, WeightOf).value);
      add(cpu, cpu / 1000 * 4096, 0, 0, false);  // 4 GiB of memory per core
    } else if (kind == "trace-share") {
      const double milli = Pick(kShareMilli, rng, WeightOf).value;
      // A fraction of a 16 GiB GPU, in 256 MiB steps.
      const int64_t mib = std::max<int64_t>(
          256, static_cast<int64_t>(std::lround(milli / 1000.0 * 16384 / 256)) * 256);
      add(static_cast<int64_t>(Pick(kShareCpu, rng, WeightOf).value), 16384, 1, mib, false);
    } else if (kind == "knative-3gib") {
      add(1000, 4096, 1, 3072, false);  // aliyun.com/gpu-mem: "3" (GiB)
    } else if (kind == "vllm-timesliced") {
      add(4000, 16384, 1, 4096, false);
    } else if (kind == "whole-1") {
      const auto cpu = static_cast<int64_t>(Pick(kWholeCpu, rng, WeightOf).value);
      add(cpu, 32768, 1, 0, true);
    } else if (kind == "knative-dedicated") {
      add(2000, 4096, 1, 0, true);  // nvidia.com/gpu: 1
    } else {
      const int n = static_cast<int>(Pick(kMultiGpu, rng, WeightOf).value);
      add(static_cast<int64_t>(n) * 11000, static_cast<int64_t>(n) * 65536, n, 0, true);
    }
  }
  return w;
}

namespace {

Result<PassResult> OnePass(const Workload& w, const std::vector<placement::PodRequest>& requests,
                           const std::string& policy_name, uint64_t seed) {
  placement::ClusterState cluster;
  GPUSHARE_RETURN_IF_ERROR(AddNodes(w, &cluster));
  Rng rng(seed);
  std::vector<int> order = ShuffledOrder(w.pods, rng);
  const std::vector<int64_t> ranks = TieRanks(w.nodes, rng);
  for (int i = 0; i < cluster.num_nodes(); ++i) cluster.set_tie_rank(i, ranks[i]);
  placement::WorkloadOptions wo;
  const placement::TargetWorkload typical = placement::BuildTargetWorkload(requests, cluster, wo);
  placement::PolicyOptions po;
  po.gpu_unit = w.gpu_unit;
  GPUSHARE_ASSIGN_OR_RETURN(auto policy,
                            placement::MakePolicy(policy_name, cluster, typical, po, &rng));
  placement::PlacementEngine engine(cluster, *policy);
  PassResult r;
  for (int i : order) {
    GPUSHARE_ASSIGN_OR_RETURN(auto id, engine.Intern(requests[i]));
    const placement::Decision d = engine.Choose(id);
    if (d.placed() && engine.Commit(id, d).ok()) {
      ++r.placed;
    } else {
      ++r.failed;
    }
  }
  for (int n = 0; n < cluster.num_nodes(); ++n) {
    const auto& s = cluster.node(n);
    for (int g = 0; g < s.num_gpus; ++g) r.gpus_in_use += s.gpu_clients[g] > 0 ? 1 : 0;
  }
  return r;
}

}  // namespace

Result<SharingComparison> CompareSharing(const Workload& w, const std::string& policy,
                                         uint64_t seed) {
  SharingComparison c;
  for (const auto& n : w.nodes) c.cluster_gpus += static_cast<int>(n.gpu_capacity.size());
  std::vector<placement::PodRequest> shared, whole;
  for (const auto& p : w.pods) {
    ++c.pods;
    shared.push_back(p.request);
    placement::PodRequest r = p.request;
    for (auto& d : r.gpus) {
      d.whole = true;
      d.share = 0;
    }
    if (!r.gpus.empty()) {
      ++c.gpu_pods;
      c.whole_gpus_needed += static_cast<int64_t>(r.gpus.size());
    }
    whole.push_back(std::move(r));
  }
  GPUSHARE_ASSIGN_OR_RETURN(c.shared, OnePass(w, shared, policy, seed));
  GPUSHARE_ASSIGN_OR_RETURN(c.whole, OnePass(w, whole, policy, seed));
  return c;
}

std::string SharingReport(const SharingComparison& c, const std::string& policy) {
  char buf[600];
  std::snprintf(
      buf, sizeof buf,
      "GPUs this workload needs (%lld pods, %lld with GPUs, on a cluster of %d GPUs):\n"
      "  with sharing (%s):  %d GPUs in use, %lld pods placed, %lld did not fit\n"
      "  whole GPUs only:    %lld GPUs needed; on this cluster %d GPUs in use, %lld pods placed, "
      "%lld did not fit\n",
      static_cast<long long>(c.pods), static_cast<long long>(c.gpu_pods), c.cluster_gpus,
      policy.c_str(), c.shared.gpus_in_use, static_cast<long long>(c.shared.placed),
      static_cast<long long>(c.shared.failed), static_cast<long long>(c.whole_gpus_needed),
      c.whole.gpus_in_use, static_cast<long long>(c.whole.placed),
      static_cast<long long>(c.whole.failed));
  return buf;
}

}  // namespace gpushare::sim
