// A target workload given to gpushare-scheduler (--target-workload FILE): the pods the cluster
// runs, as fragmentation-aware policies (FGD, `default`) weigh a node's free GPUs against them.
//
// Without one, the cache learns the workload from the pods it sees (the pods bound to its nodes,
// CPU-only ones included), which knows little early on: a fresh cluster, or a scheduler just
// restarted into a burst of a shape it has not seen. FGD's own evaluation takes the workload
// from the whole trace in advance; an operator who knows what the cluster runs (last week's
// pods) gives it the same way. The file is the pod list CSV of `gpushare simulate` (Alibaba's
// openb_pod_list_*.csv): a header, then one row per pod with `cpu_milli`, `num_gpu` and
// `gpu_milli` (other columns, such as `name` or `memory_mib`, are ignored), and an optional
// `count` column for a row that stands for that many pods. A row is the pod of
// docs/memory-shares.md's mapping: `alibabacloud.com/gpu-milli: num_gpu x gpu_milli` (a fraction
// of one GPU below 1000, whole GPUs in thousands), num_gpu 0 a pod asking no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/memshare.h"
#include "core/status.h"

namespace gpushare::scheduler {

// One kind of pod of the target workload, and how many of the workload's pods it is.
struct TargetPod {
  int64_t cpu_milli = 0;
  int64_t gpu_milli = 0;  // what the pod asks in alibabacloud.com/gpu-milli; 0: no GPU
  int64_t count = 0;
  memshare::PodRequest request;  // the request of gpu_milli (empty when 0)

  bool operator==(const TargetPod& o) const {
    return cpu_milli == o.cpu_milli && gpu_milli == o.gpu_milli && count == o.count;
  }
};

// At most this many pods in all (counts summed): 2^40, so that counts sum without overflow.
inline constexpr int64_t kMaxTargetPods = int64_t{1} << 40;

// Rows of equal (cpu_milli, gpu_milli) merged, sorted by them. Errors name the file, line and
// column ("w.csv:3:7: gpu_milli: a share below 1000 needs num_gpu = 1, got 2 GPUs x 500").
Result<std::vector<TargetPod>> ParseTargetWorkload(const std::string& path,
                                                   std::string_view content);
// Reads `path` as every input file is read (config/file_read.h; at most config::kMaxCsvFileBytes).
Result<std::vector<TargetPod>> LoadTargetWorkload(const std::string& path);

// The pods in all.
int64_t TargetPodCount(const std::vector<TargetPod>& pods);

}  // namespace gpushare::scheduler
