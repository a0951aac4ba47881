// Dynamic replay: pods arrive at their creation_time and leave at their deletion_time.
//
// The published protocol only ever adds pods; the dynamic mode answers the capacity-planning
// question instead: with real lifetimes, how much of the GPU capacity is allocated over time,
// and how many pods had to wait or never ran. A pod that does not fit on arrival waits (FIFO);
// whenever a pod leaves a node, waiting pods are retried on that node (only it changed, so only
// it can newly fit them). A waiting pod whose deletion time passes without having run counts
// as failed. Events at the same instant: departures first, then arrivals by name. Pods without
// a deletion time stay to the end; pods whose deletion time is not after their creation time
// are skipped (counted). The seed drives node tie ranks and random choices, as in the static
// protocol.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/placement/fragmentation.h"
#include "core/status.h"
#include "sim/trace.h"

namespace gpushare::sim {

struct DynamicSample {
  int64_t time = 0;
  double allocated_pct = 0;
  int64_t waiting = 0;
};

struct DynamicResult {
  std::string policy;
  uint64_t seed = 0;
  Status status;
  int64_t pods = 0;     // pods replayed
  int64_t skipped = 0;  // zero or negative lifetime
  int64_t placed_on_arrival = 0;
  int64_t waited = 0;      // placed after waiting
  int64_t failed = 0;      // never ran (deleted while waiting, or still waiting at the end)
  double mean_wait_s = 0;  // over pods that waited and then ran
  double max_wait_s = 0;
  int64_t max_waiting = 0;
  double time_weighted_alloc_pct = 0;   // allocated GPU share, averaged over the replay span
  double time_weighted_demand_pct = 0;  // GPU share requested by live pods (running or waiting)
  double peak_alloc_pct = 0;
  std::vector<DynamicSample> samples;  // about 500, evenly spaced in time
  double seconds = 0;
};

DynamicResult RunDynamic(const Workload& workload, const placement::TargetWorkload& typical,
                         const std::string& policy, uint64_t seed);

// Every (policy, seed) in parallel; `progress` as in ExperimentOptions.
std::vector<DynamicResult> RunDynamicExperiment(const Workload& workload,
                                                const std::vector<std::string>& policies,
                                                const std::vector<uint64_t>& seeds, int jobs,
                                                const std::function<void(int, int)>& progress);

std::string DynamicCsv(const std::vector<DynamicResult>& runs);
std::string DynamicSummaryCsv(const std::vector<DynamicResult>& runs);
std::string DynamicTable(const std::vector<DynamicResult>& runs);

}  // namespace gpushare::sim
