// Fuzzes the trace readers of `gpushare simulate` (the pod list and node list CSVs) and
// gpushare-scheduler's --target-workload file, which is a pod list too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scheduler/target_workload.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pods = gpushare::sim::ParsePodCsv("pods.csv", text);
  if (!pods.ok() && pods.status().message().empty()) __builtin_trap();
  auto nodes = gpushare::sim::ParseNodeCsv("nodes.csv", text);
  if (!nodes.ok() && nodes.status().message().empty()) __builtin_trap();
  auto workload = gpushare::scheduler::ParseTargetWorkload("workload.csv", text);
  if (!workload.ok() && workload.status().message().empty()) __builtin_trap();
  if (workload.ok() && workload->empty()) __builtin_trap();
  return 0;
}
