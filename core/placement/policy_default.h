// The `default` placement policy: gpushare's own, designed to leave less GPU capacity stranded
// than FGD. The idea and the evidence are in docs/placement.md.
#pragma once

#include <memory>

#include "core/placement/policy.h"

namespace gpushare::placement {

Result<std::unique_ptr<Policy>> MakeDefaultPolicy(const ClusterState& cluster, const TargetWorkload& workload,
                                                  const PolicyOptions& options);

}  // namespace gpushare::placement
