// HAMi's pod spec, read as gpushare's: what a container that asks HAMi's vGPU resources
// becomes in gpushare's resources, so a HAMi user migrates without editing manifests
// (gpushare-scheduler's webhook rewrites the containers at creation with --hami-resources;
// docs/memory-shares.md, "HAMi's pod spec").
//
// HAMi's resources (Project-HAMi/HAMi, pkg/device/nvidia: GenerateResourceRequests, at the
// commit the e2e builds), each read from the limit, else the request:
//   nvidia.com/gpu                 how many GPUs (vGPUs) the container gets; without it the
//                                  container is not HAMi's
//   nvidia.com/gpumem              MiB of each GPU (0 or absent: unset)
//   nvidia.com/gpumem-percentage   percent of each GPU's memory (above 100: 100; 0 or absent:
//                                  unset); gpumem wins when both are set
//   nvidia.com/gpucores            percent of each GPU's compute
// With neither memory resource the container gets the whole memory (HAMi's default with
// defaultMemory 0). What gpushare makes of it, one GPU:
//   gpumem M                       aliyun.com/gpu-mem: ceil(M / unit) (the scheduler's unit, GiB
//                                  or MiB: 3000 MiB is 3 GiB)
//   gpumem-percentage P < 100      alibabacloud.com/gpu-milli: 10 x P (a fraction)
//   the whole memory               alibabacloud.com/gpu-milli: 1000 (a whole GPU)
// and N GPUs of the whole memory: alibabacloud.com/gpu-milli N x 1000. nvidia.com/gpucores stays
// (gpushare reads it: core/memshare.h, compute shares), except on whole GPUs, which are not
// compute-limited (dropped, and said). Memory on several GPUs in one container is refused (not
// supported yet), as is what gpushare cannot express (a fraction in an init container). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/memshare.h"
#include "core/status.h"

namespace gpushare::hami {

inline constexpr std::string_view kGpu = "nvidia.com/gpu";
inline constexpr std::string_view kGpuMem = "nvidia.com/gpumem";
inline constexpr std::string_view kGpuMemPercentage = "nvidia.com/gpumem-percentage";
inline constexpr std::string_view kGpuCores = "nvidia.com/gpucores";
// The pod annotation the webhook writes: what each rewritten container asked, as HAMi's names.
inline constexpr std::string_view kOriginalAnnotation = "gpushare.io/hami-resources";

// HAMi's names that the rewrite replaces in a container's limits and requests (gpucores stays).
inline constexpr std::string_view kReplaced[] = {kGpu, kGpuMem, kGpuMemPercentage};

// What one container asks of HAMi's resources (limit, else request; nullopt when absent).
struct ContainerAsk {
  std::string name;
  bool init = false;
  std::optional<int64_t> gpus, mem_mib, mem_percent, cores;
  // Whether it asks any HAMi memory or compute resource (what makes nvidia.com/gpu HAMi's).
  bool AsksShares() const {
    return mem_mib.value_or(0) > 0 || mem_percent.value_or(0) > 0 || cores.value_or(0) > 0;
  }
};

// gpushare's resources for the container (set as its limits), and what the rewrite dropped.
struct Rewrite {
  std::vector<std::pair<std::string, int64_t>> limits;  // resource -> quantity
  bool keep_cores = false;  // nvidia.com/gpucores stays in the container's resources
  std::vector<std::string> notes;
};

// The rewrite of one container, or nullopt when it is not HAMi's (no memory or compute
// resource of HAMi's asked). `resource_name` is gpushare's memory-share resource (the
// scheduler's --resource-name). Errors (kInvalidArgument) name the container and the field.
Result<std::optional<Rewrite>> RewriteContainer(const ContainerAsk& ask, memshare::MemoryUnit unit,
                                                std::string_view resource_name);

}  // namespace gpushare::hami
