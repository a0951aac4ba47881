// The aliyun.com/gpu-mem request of a kube::Pod, in the form core/memshare.h works on.
//
// Reads every container's and init container's limits and requests of aliyun.com/gpu-mem
// (whole-number quantities, kube/quantity.h) and hands them to memshare::ComputePodRequest
// (limits win; containers without the resource take no part), with each container's compute
// share (aliyun.com/gpu-core.percentage or nvidia.com/gpucores). Used by gpushare-scheduler and
// gpushare-node alike, so both count a pod the same way.
#pragma once

#include <string_view>

#include "core/memshare.h"
#include "core/status.h"
#include "kube/objects.h"

namespace gpushare::kube {

// Errors name the container and the field, e.g.
// `pod ml/train-0: spec.containers[1].resources.limits[aliyun.com/gpu-mem]: must be a whole number,
// got "1.5"`. `resource` is the memory-share resource name (renamed with gpushare-node's
// memoryShares.resourceName and gpushare-scheduler's --resource-name).
Result<memshare::PodRequest> PodMemRequest(const Pod& pod,
                                           std::string_view resource = memshare::kResourceName);
// The same, with alibabacloud.com/gpu-milli read too (fractions and whole GPUs placed by
// gpushare-scheduler; memshare::PodRequest::Resolve turns them into units on a node).
Result<memshare::PodRequest> PodGpuRequest(const Pod& pod,
                                           std::string_view resource = memshare::kResourceName);
// PodGpuRequest with the pod's GPU choice (core/gpu_selector.h: nvidia.com/use-gputype ...):
// what a placement decision (filter, prioritize, bind, preemption) works on. A malformed choice
// is an error here; counting a pod already placed (PodGpuRequest) never reads it, so a pod bound
// by other means is still counted.
Result<memshare::PodRequest> PodPlacementRequest(
    const Pod& pod, std::string_view resource = memshare::kResourceName);

}  // namespace gpushare::kube
