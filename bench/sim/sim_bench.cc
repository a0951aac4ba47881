// One full (policy, seed) run of the reference protocol on the default trace to 130%, on one
// core; needs ../shared/data (skipped otherwise).
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include "sim/experiment.h"
#include "sim/trace.h"

namespace {

const std::string kDir = std::string(GPUSHARE_SHARED_DIR) + "/data/alibaba-gpu-v2023";

void BM_TraceRun(benchmark::State& state, const std::string& policy) {
  struct stat st;
  if (stat((kDir + "/openb_pod_list_default.csv").c_str(), &st) != 0) {
    state.SkipWithError(("SKIPPED: " + kDir + " absent").c_str());
    return;
  }
  auto w = gpushare::sim::LoadWorkload(kDir + "/openb_node_list_gpu_node.csv",
                                       kDir + "/openb_pod_list_default.csv");
  if (!w.ok()) {
    state.SkipWithError(w.status().message().c_str());
    return;
  }
  const auto typical = gpushare::sim::TypicalWorkload(*w, 0.95);
  uint64_t seed = 42;
  double unallocated = 0;
  for (auto _ : state) {
    const auto r = gpushare::sim::RunOne(*w, typical, policy, seed++, 1.3);
    if (!r.status.ok() || r.curve.size() <= 100) {
      state.SkipWithError(r.status.ok() ? "short curve" : r.status.message().c_str());
      return;
    }
    unallocated = r.curve[100].unallocated_pct;
  }
  state.SetLabel("unallocated at 100%: " + std::to_string(unallocated));
}

}  // namespace

BENCHMARK_CAPTURE(BM_TraceRun, fgd, std::string("fgd"))
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TraceRun, default, std::string("default"))
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TraceRun, bestfit, std::string("bestfit"))
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
