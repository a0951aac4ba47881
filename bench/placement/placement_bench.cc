// One placement decision (choose + commit) on clusters shaped like Alibaba's GPU trace:
// 1213 nodes (the trace's node mix) and 5000 nodes (the same mix, scaled), kept between 50% and
// 90% allocated with a trace-like pod stream. Also the same decision with the verdict cache off
// (every node re-scored), the cost of the first decision of a pod shape.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "core/placement/engine.h"
#include "core/placement/policy.h"

namespace {

using namespace gpushare::placement;

struct NodeType {
  const char* model;
  int count;  // in the 1213-node trace cluster
  int64_t cpu;
  int64_t mem;
  int gpus;
};
const NodeType kTypes[] = {{"G2", 549, 96000, 393216, 8},    {"T4", 387, 104000, 524288, 2},
                           {"T4", 17, 96000, 393216, 4},     {"G3", 39, 128000, 786432, 8},
                           {"P100", 107, 16000, 122880, 2},  {"P100", 22, 64000, 262144, 2},
                           {"P100", 5, 8000, 61440, 1},      {"V100M32", 21, 96000, 786432, 8},
                           {"V100M32", 9, 48000, 376832, 4}, {"V100M16", 28, 32000, 131072, 4},
                           {"V100M16", 19, 8000, 32768, 1},  {"V100M16", 8, 64000, 262144, 8},
                           {"A10", 2, 128000, 1048576, 1}};

// The trace's most common task shapes (cpu milli, GPUs, milli per GPU) with their counts.
struct PodType {
  int64_t cpu;
  int gpus;
  int64_t milli;
  int count;
};
const PodType kPods[] = {
    {3150, 1, 810, 1047}, {11300, 1, 1000, 874}, {11400, 1, 1000, 599}, {3150, 1, 1000, 470},
    {11910, 1, 470, 388}, {12500, 0, 0, 366},    {8000, 1, 470, 360},   {12000, 1, 1000, 326},
    {32000, 0, 0, 290},   {18710, 1, 1000, 255}, {11910, 1, 650, 237},  {4000, 1, 320, 232},
    {8000, 0, 0, 185},    {4000, 1, 230, 122},   {6000, 1, 460, 120},   {88000, 8, 1000, 44},
    {44000, 4, 1000, 15}, {22000, 2, 1000, 16},  {4000, 1, 160, 54},    {8000, 1, 320, 72}};

std::vector<NodeSpec> Nodes(int total) {
  std::vector<NodeSpec> out;
  int made = 0;
  for (int round = 0; made < total; ++round)
    for (const auto& t : kTypes)
      for (int i = 0; i < t.count && made < total; ++i) {
        NodeSpec n;
        n.name = "node-" + std::to_string(made++);
        n.cpu_milli = t.cpu;
        n.memory_mib = t.mem;
        n.gpu_model = t.model;
        n.gpu_capacity.assign(static_cast<size_t>(t.gpus), 1000);
        out.push_back(n);
      }
  return out;
}

std::vector<PodRequest> Stream(int n, uint64_t seed) {
  std::vector<PodRequest> kinds, out;
  std::vector<int> weights;
  int total = 0;
  for (const auto& p : kPods) {
    kinds.push_back(MakePodRequest(p.cpu, 0, p.gpus, p.milli));
    weights.push_back(p.count);
    total += p.count;
  }
  Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    int x = static_cast<int>(rng.Uniform(static_cast<uint64_t>(total)));
    size_t k = 0;
    while (x >= weights[k]) x -= weights[k++];
    out.push_back(kinds[k]);
  }
  return out;
}

struct Bench {
  ClusterState cluster;
  TargetWorkload workload;
  Rng rng{1};
  std::unique_ptr<Policy> policy;
  std::unique_ptr<PlacementEngine> engine;
  std::vector<ShapeId> shapes;
  size_t next = 0;

  Bench(const std::string& name, int nodes, bool cache) {
    for (const auto& n : Nodes(nodes)) (void)cluster.AddNode(n);
    std::vector<PodRequest> observed = Stream(8000, 7);
    workload = BuildTargetWorkload(observed, cluster, WorkloadOptions{});
    policy = std::move(MakePolicy(name, cluster, workload, PolicyOptions{}, &rng)).value();
    EngineOptions o;
    o.cache = cache;
    engine = std::make_unique<PlacementEngine>(cluster, *policy, o);
    for (const auto& r : Stream(200000, 11)) shapes.push_back(*engine->Intern(r));
    Fill(0.5);
  }
  double Allocated() const {
    return 1.0 - static_cast<double>(cluster.gpu_free_total()) /
                     static_cast<double>(cluster.gpu_capacity_total());
  }
  void Step() {
    const ShapeId s = shapes[next++ % shapes.size()];
    const Decision d = engine->Choose(s);
    if (d.placed()) (void)engine->Commit(s, d);
  }
  void Fill(double level) {
    while (Allocated() < level) Step();
  }
};

void BM_Decision(benchmark::State& state, const std::string& policy, bool cache) {
  const int nodes = static_cast<int>(state.range(0));
  auto b = std::make_unique<Bench>(policy, nodes, cache);
  for (auto _ : state) {
    b->Step();
    if (b->Allocated() > 0.9) {
      state.PauseTiming();
      b = std::make_unique<Bench>(policy, nodes, cache);
      state.ResumeTiming();
    }
  }
  state.SetLabel("allocated " + std::to_string(static_cast<int>(100 * b->Allocated())) + "%");
}

}  // namespace

BENCHMARK_CAPTURE(BM_Decision, default, std::string("default"), true)
    ->Arg(1213)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, fgd, std::string("fgd"), true)
    ->Arg(1213)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, bestfit, std::string("bestfit"), true)
    ->Arg(1213)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, default_nocache, std::string("default"), false)
    ->Arg(1213)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, fgd_nocache, std::string("fgd"), false)
    ->Arg(1213)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
