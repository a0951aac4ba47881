// GpuSelector: the GPU models and devices a pod may or may not use, from the pod annotations
// HAMi's users already write (their syntax and matching as HAMi's scheduler reads them):
//
//   nvidia.com/use-gputype    "A100,H100"   only GPUs whose model contains one of these
//   nvidia.com/nouse-gputype  "T4"          no GPU whose model contains one of these
//   nvidia.com/use-gpuuuid    "GPU-ab..,.." only these GPUs
//   nvidia.com/nouse-gpuuuid  "GPU-cd.."    not these GPUs
//
// Lists are comma-separated; entries are trimmed of blanks and empty entries are ignored, so an
// empty or blank value is no constraint. A model entry matches a GPU whose model (NVML's
// product name, "NVIDIA A100-SXM4-80GB") contains it, case-insensitively ("a100" matches); a
// UUID entry matches that UUID exactly. A GPU must pass all four. docs/memory-shares.md ("Choosing
// GPUs").
//
// Pure: no I/O. Used by gpushare-scheduler's filter (memory shares and fractions), its webhook
// (which refuses a model no GPU of the cluster has) and gpushare-node.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare {

inline constexpr std::string_view kUseGpuTypeAnnotation = "nvidia.com/use-gputype";
inline constexpr std::string_view kNoUseGpuTypeAnnotation = "nvidia.com/nouse-gputype";
inline constexpr std::string_view kUseGpuUuidAnnotation = "nvidia.com/use-gpuuuid";
inline constexpr std::string_view kNoUseGpuUuidAnnotation = "nvidia.com/nouse-gpuuuid";

// Bounds on what a pod may write (a hostile or mistaken pod must not cost unbounded work per
// node): entries per annotation and bytes per entry.
inline constexpr size_t kMaxSelectorEntries = 64;
inline constexpr size_t kMaxSelectorEntryBytes = 128;

struct GpuSelector {
  std::vector<std::string> use_types;  // as written (matched case-insensitively)
  std::vector<std::string> nouse_types;
  std::vector<std::string> use_uuids;
  std::vector<std::string> nouse_uuids;

  bool empty() const {
    return use_types.empty() && nouse_types.empty() && use_uuids.empty() && nouse_uuids.empty();
  }
  // Whether the pod may use the GPU of this model and UUID (no allocation: the hot path).
  bool Allows(std::string_view model, std::string_view uuid) const;
  // Why the GPU of this model and UUID is excluded, naming the annotation and the value that
  // decides ("nvidia.com/use-gputype=A100,H100 does not match NVIDIA A10"), or nullopt when the
  // pod may use it.
  std::optional<std::string> Excludes(std::string_view model, std::string_view uuid) const;
  // The annotations back, "nvidia.com/use-gputype=A100; nvidia.com/nouse-gpuuuid=GPU-1".
  std::string Describe() const;

  bool operator==(const GpuSelector&) const = default;
};

// Reads the four annotations. Errors name the annotation and what is wrong (too many entries,
// an entry too long, a control character).
Result<GpuSelector> ParseGpuSelector(const std::map<std::string, std::string>& annotations);

// Whether `model` contains `entry`, ignoring ASCII case.
bool ModelMatches(std::string_view model, std::string_view entry);

// The entries of use_types/nouse_types that match none of `models` (the models of a cluster's
// GPUs): names a pod may have mistyped.
std::vector<std::string> UnknownModels(const GpuSelector& s,
                                       const std::vector<std::string>& models);

}  // namespace gpushare
