// The reference experiment protocol of FGD's simulator (shared/reference/fgd-benchmark.md §4),
// run over seeds x policies in parallel.
//
// One run, for one (policy, seed):
//   1. the target workload (typical pods) comes from the original pod list (fixed per trace);
//   2. pods are sorted by name, then shuffled with the seeded Rng;
//   3. inflation to `tune` x GPU capacity: while the total is below, pods drawn uniformly with
//      replacement are appended, stopping at the first draw whose *per-GPU* share would cross
//      the target (the reference's quirk: the running total adds num_gpu x share); above it,
//      uniformly chosen pods are removed until the total is within;
//   4. nodes get a seeded permutation as tie ranks (the reference prefixes names with it);
//   5. pods are submitted one at a time: placed or failed (never retried, nothing departs);
//      failed pods count as arrived. After each pod the run samples arrived, allocated and
//      fragmented GPU (FGD's measure with the typical pods);
//   6. samples are binned to integer arrived percent the way the reference's analysis scripts
//      do: round-half-even of arrived %, the mean of the samples in the bin (or within +-1 when
//      the bin is empty), each sample's allocation rounded to 0.01 % first.
// Randomness is drawn in that order (2, 3, 4, then the policy's own) from one Rng per run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/placement/fragmentation.h"
#include "core/placement/policy.h"
#include "core/placement/rng.h"
#include "sim/trace.h"

namespace gpushare::sim {

// Step 2: indices into workload.pods, sorted by name then shuffled.
std::vector<int> ShuffledOrder(const std::vector<TracePod>& pods, placement::Rng& rng);
// Step 3: inflates (or deflates) `order` to tune x capacity. tune <= 0 leaves it unchanged.
std::vector<int> TuneOrder(std::vector<int> order, const std::vector<TracePod>& pods,
                           int64_t capacity, double tune, placement::Rng& rng);
// Step 4: tie ranks for nodes given by name: the name-sorted position's permutation value.
std::vector<int64_t> TieRanks(const std::vector<placement::NodeSpec>& nodes, placement::Rng& rng);

struct Sample {
  int64_t arrived = 0;  // GPU share requested by pods submitted so far (failed ones included)
  int64_t used = 0;     // GPU share allocated
  double frag = 0;      // cluster fragmentation (FGD's measure), in share units
};

struct CurvePoint {
  int arrived_pct = 0;
  bool present = false;  // false when no sample fell in the bin or next to it
  double allocated_pct = 0;
  double unallocated_pct = 0;  // 100 - allocated_pct
  double frag_pct = 0;
};

// Step 6. Bins 0..max_pct.
std::vector<CurvePoint> BinSamples(const std::vector<Sample>& samples, int64_t capacity,
                                   int max_pct);

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  Status status;  // not OK when the run could not start (e.g. unknown policy)
  std::vector<CurvePoint> curve;
  int64_t pods_submitted = 0;
  int64_t pods_failed = 0;
  int64_t failed_gpu_demand = 0;  // share units
  int64_t capacity = 0;           // GPU share capacity of the cluster
  double seconds = 0;             // wall time of the run
};

struct ExperimentOptions {
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  double tune = 1.3;
  double popularity = 0.95;  // typical-pod cut of the target workload
  int jobs = 0;              // worker threads; 0: one per hardware thread
  // Called (from worker threads, serialised) as runs finish: (finished, total).
  std::function<void(int, int)> progress;
};

// Adds the workload's nodes to an empty cluster.
Status AddNodes(const Workload& workload, placement::ClusterState* cluster);

// Starts a run's result (policy, seed) and adds the workload's nodes to `cluster`; false, with
// the reason in r->status, when they cannot be added. R: RunResult or DynamicResult.
template <typename R>
bool BeginRun(const Workload& workload, const std::string& policy, uint64_t seed, R* r,
              placement::ClusterState* cluster) {
  r->policy = policy;
  r->seed = seed;
  r->status = AddNodes(workload, cluster);
  return r->status.ok();
}

// Runs work(0..count-1) on `jobs` threads (0: one per hardware thread); progress(done, count)
// is called serialised after each item.
void ParallelFor(size_t count, int jobs, const std::function<void(size_t)>& work,
                 const std::function<void(int, int)>& progress);

// The target workload of a trace (typical pods), as FGD computes it.
placement::TargetWorkload TypicalWorkload(const Workload& workload, double popularity);

// One run. `typical` must come from TypicalWorkload(workload, ...).
RunResult RunOne(const Workload& workload, const placement::TargetWorkload& typical,
                 const std::string& policy, uint64_t seed, double tune);

// The same with a policy built by `factory` (for policies outside placement::MakePolicy).
using PolicyFactory = std::function<Result<std::unique_ptr<placement::Policy>>(
    const placement::ClusterState&, const placement::TargetWorkload&,
    const placement::PolicyOptions&, placement::Rng*)>;
RunResult RunOneWith(const Workload& workload, const placement::TargetWorkload& typical,
                     const std::string& label, const PolicyFactory& factory, uint64_t seed,
                     double tune);

// Every (policy, seed), in parallel; results in policy-major order.
std::vector<RunResult> RunExperiment(const Workload& workload, const ExperimentOptions& options);

struct SummaryPoint {
  std::string policy;
  int arrived_pct = 0;
  double unallocated_median = 0;
  double frag_median = 0;
  int runs = 0;
};
// Median over seeds per policy and arrived percent (pandas/numpy median: the mean of the two
// middle values for an even count).
std::vector<SummaryPoint> Summarize(const std::vector<RunResult>& runs);

double Median(std::vector<double> v);

}  // namespace gpushare::sim

namespace gpushare::sim {
// The ranges of `gpushare simulate`'s numeric flags: --seeds (how many), --tune, --jobs.
inline constexpr uint64_t kMaxSeeds = 1000;
inline constexpr double kMaxTune = 10;
inline constexpr int kMaxJobs = 1024;

// "42-51", "1,2,7-9": seeds in the given order, duplicates removed; at most kMaxSeeds asked for.
Result<std::vector<uint64_t>> ParseSeeds(std::string_view text);
// "fgd,default" or "all": known policy names (placement::PolicyNames()).
Result<std::vector<std::string>> ParsePolicies(std::string_view text);
}  // namespace gpushare::sim
