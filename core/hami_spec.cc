// See hami_spec.h.
#include "core/hami_spec.h"

#include <algorithm>

namespace gpushare::hami {

Result<std::optional<Rewrite>> RewriteContainer(const ContainerAsk& ask, memshare::MemoryUnit unit,
                                                std::string_view resource_name) {
  const std::string what =
      std::string(ask.init ? "init container" : "container") + " \"" + ask.name + "\"";
  const int64_t gpus = ask.gpus.value_or(0);
  const int64_t mem = std::max<int64_t>(ask.mem_mib.value_or(0), 0);
  int64_t percent = std::max<int64_t>(ask.mem_percent.value_or(0), 0);
  if (gpus <= 0) {
    if (mem > 0 || percent > 0)
      return Status::InvalidArgument(
          what + ": " + std::string(mem > 0 ? kGpuMem : kGpuMemPercentage) + " without " +
          std::string(kGpu) + " (HAMi's spec: how many GPUs, then the memory of each)");
    return std::optional<Rewrite>();
  }
  if (!ask.AsksShares()) return std::optional<Rewrite>();  // a whole GPU, as NVIDIA's plugin has it
  Rewrite out;
  if (percent > 100) {
    out.notes.push_back(std::string(kGpuMemPercentage) + " " + std::to_string(percent) +
                        " taken as 100, as HAMi does");
    percent = 100;
  }
  if (mem > 0 && percent > 0)
    out.notes.push_back(std::string(kGpuMem) + " wins over " + std::string(kGpuMemPercentage) +
                        ", as in HAMi");
  const bool whole = mem == 0 && (percent == 0 || percent == 100);
  if (gpus > 1 && !whole)
    return Status::InvalidArgument(
        what + ": " + std::string(kGpu) + " " + std::to_string(gpus) + " with " +
        std::string(mem > 0 ? kGpuMem : kGpuMemPercentage) +
        ": memory shares on several GPUs in one container are not supported yet (ask one GPU, "
        "or whole GPUs)");
  if (gpus > memshare::kMaxWholeGpusPerContainer)
    return Status::InvalidArgument(
        what + ": " + std::string(kGpu) + " " + std::to_string(gpus) + " is more than " +
        std::to_string(memshare::kMaxWholeGpusPerContainer) + " whole GPUs in one container");
  if (whole) {
    if (ask.init)
      return Status::InvalidArgument(what + ": whole GPUs (" + std::string(kGpu) +
                                     " without memory) in an init container: gpushare places "
                                     "whole memory-share GPUs for app containers only");
    out.limits.push_back({std::string(memshare::kMilliResource), gpus * memshare::kMilliPerGpu});
    if (ask.cores.value_or(0) > 0)
      out.notes.push_back(std::string(kGpuCores) + " dropped: a whole GPU is not compute-limited");
    return std::optional<Rewrite>(std::move(out));
  }
  out.keep_cores = ask.cores.value_or(0) > 0;
  if (mem > 0) {
    const int64_t unit_mib = memshare::UnitMiB(unit);
    const int64_t units = (mem + unit_mib - 1) / unit_mib;
    if (units * unit_mib != mem)
      out.notes.push_back(std::string(kGpuMem) + " " + std::to_string(mem) + " MiB rounded up to " +
                          std::to_string(units) + " " +
                          std::string(memshare::MemoryUnitName(unit)));
    out.limits.push_back({std::string(resource_name), units});
    return std::optional<Rewrite>(std::move(out));
  }
  if (ask.init)
    return Status::InvalidArgument(what + ": " + std::string(kGpuMemPercentage) +
                                   " in an init container: a fraction is for app containers "
                                   "only (ask " +
                                   std::string(kGpuMem) + ")");
  out.limits.push_back({std::string(memshare::kMilliResource), percent * 10});
  return std::optional<Rewrite>(std::move(out));
}

}  // namespace gpushare::hami
