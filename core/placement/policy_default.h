// The `default` placement policy: gpushare's own, designed to leave less GPU capacity stranded
// than FGD. The idea and the evidence are in docs/placement.md; in short, a node (and GPU) for a
// pod is chosen by the smallest expected loss, in GPUs, summed over three causes of stranded
// capacity, each priced from the distribution of past pods (TargetWorkload::all_shapes):
//   packing  for sharing pods: SharePrices::Cost of putting the share into that GPU's gap
//            (0 when the placement matches an optimal packing of the observed share sizes);
//   cpu      the change in free GPU capacity (in GPUs) the node's free CPU can no longer serve,
//            at rho CPU per GPU (rho: CPU per GPU of past GPU pods; CPU-only pods use
//            cpu_only_rho_scale * rho);
//   model    GPU-model scarcity: using a model that pods constrained to it need, when the pod
//            could use a less contended one (the share of each model's capacity that
//            model-constrained pods claim).
// Ties (many placements cost the same) go to the higher FGD score (FGD's truncated sigmoid of
// the typical-pod fragmentation delta), then to the node tie rank, which packs nodes in a
// consistent order and keeps untouched nodes for multi-GPU pods.
#pragma once

#include <memory>

#include "core/placement/policy.h"

namespace gpushare::placement {

struct DefaultPolicyOptions {
  double cpu_weight = 1.0;          // weight of the CPU-stranding term
  double model_weight = 1.0;        // weight of the model-scarcity term
  double cpu_only_rho_scale = 0.7;  // rho multiplier when the pod uses no GPU
};

Result<std::unique_ptr<Policy>> MakeDefaultPolicy(const ClusterState& cluster,
                                                  const TargetWorkload& workload,
                                                  const PolicyOptions& options,
                                                  const DefaultPolicyOptions& tuning = {});

}  // namespace gpushare::placement
