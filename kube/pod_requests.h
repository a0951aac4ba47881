// The CPU and memory a pod requests, as kube-scheduler's resource fit counts them: the sum over
// its containers, or the largest init container where that is more (each container's request,
// or its limit when it sets only a limit). Restartable init containers (sidecars) and pod
// overhead are not counted. Malformed quantities count as 0: the API server refuses them.
#pragma once

#include <cstdint>

#include "kube/objects.h"

namespace gpushare::kube {

struct CpuMemory {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
};

CpuMemory PodCpuMemoryRequests(const Pod& pod);
// The node's allocatable CPU and memory (0 where absent or unreadable).
CpuMemory NodeAllocatable(const Node& node);

}  // namespace gpushare::kube
