// Trace files: the cluster (node list) and workload (pod list) CSVs of Alibaba's
// cluster-trace-gpu-v2023, the format `gpushare simulate --nodes/--pods` reads.
//
// Node CSV: sn, cpu_milli, memory_mib, gpu, model. Every GPU holds 1000 milli-GPU.
// Pod CSV: name, cpu_milli, memory_mib, num_gpu, gpu_milli [, gpu_spec, qos, pod_phase,
// creation_time, deletion_time, scheduled_time]. gpu_milli is the share of each GPU
// (1000 = whole GPUs; below 1000 only with num_gpu = 1); gpu_spec lists allowed models with '|'.
// Every row becomes a pod (Failed and Pending ones too, as in the reference experiments). A
// malformed row is an error with file:line:column; nothing is dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/pod.h"
#include "core/status.h"

namespace gpushare::sim {

inline constexpr int64_t kMilliPerGpu = 1000;

struct TracePod {
  std::string name;
  placement::PodRequest request;
  int num_gpu = 0;
  int64_t gpu_milli = 0;  // per GPU, as in the file
  std::string gpu_spec;
  std::optional<int64_t> creation_time;  // seconds from the trace start
  std::optional<int64_t> deletion_time;
  int line = 0;

  // The GPU amount the reference protocol counts as arrived for this pod.
  int64_t gpu_demand() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
};

struct Workload {
  std::string name;  // shown in reports (e.g. the pod file's base name)
  std::vector<placement::NodeSpec> nodes;
  std::vector<TracePod> pods;
  int64_t gpu_unit = kMilliPerGpu;  // share units in one whole GPU
};

Result<std::vector<placement::NodeSpec>> LoadNodeCsv(const std::string& path);
Result<std::vector<TracePod>> LoadPodCsv(const std::string& path);
// Parses already-read content (tests, generated inputs); `path` names it in messages.
Result<std::vector<placement::NodeSpec>> ParseNodeCsv(const std::string& path,
                                                      std::string_view content);
Result<std::vector<TracePod>> ParsePodCsv(const std::string& path, std::string_view content);

// Both files; the workload is named after the pod file.
Result<Workload> LoadWorkload(const std::string& nodes_path, const std::string& pods_path);

}  // namespace gpushare::sim
