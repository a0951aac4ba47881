// Policy: how the placement engine ranks the nodes that can take a pod, and picks its GPUs.
//
// Policies: `random`, `dotprod`, `clustering`, `packing`, `bestfit`, `fgd` (the reference
// simulator's, with the same integer scores and tie behaviour; see
// docs/placement.md) and `default`, gpushare's own (the one the scheduler uses unless told
// otherwise). A policy only ever sees feasible nodes: the engine filters first (CheckFit in
// pod.h). Higher scores win; equal scores go to the higher tiebreak, then to the node with the
// smaller tie rank (ClusterState::tie_rank).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/fragmentation.h"
#include "core/placement/pod.h"
#include "core/placement/rng.h"
#include "core/status.h"

namespace gpushare::placement {

struct Score {
  double value = 0;
  double tiebreak = 0;
};

inline bool Better(const Score& a, const Score& b) {
  return a.value > b.value || (a.value == b.value && a.tiebreak > b.tiebreak);
}

// A policy's verdict on one feasible node.
struct NodeChoice {
  Score score;
  GpuAssignment gpus;
  double detail = 0;  // policy-specific number for explanations (e.g. FGD's fragmentation delta)
};

struct PolicyOptions {
  // Share units in one whole GPU: 1000 for milli-GPU. Scales FGD's sigmoid and the default
  // policy's costs to "GPUs".
  int64_t gpu_unit = 1000;
  // Normalisers of DotProd, BestFit and GpuClustering: the largest node's CPU (milli) and GPU
  // capacity (share units). 0: taken from the cluster (the trace gives 128000 and 8000, the
  // reference's constants).
  double max_node_cpu = 0;
  double max_node_gpu = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;

  // True when Evaluate() depends only on the node's state and the pod, so the engine may reuse
  // a result until the node's version changes.
  virtual bool node_local() const { return true; }
  // Scores a feasible node and chooses its GPUs.
  virtual NodeChoice Evaluate(NodeId node, const PodShape& pod) = 0;
  // Post-processes the scores of every feasible node of one decision (BestFit min-max
  // normalises them). Only called when normalizes() is true.
  virtual bool normalizes() const { return false; }
  virtual void Normalize(std::vector<Score>& /*scores*/) const {}
  // A policy that picks the node itself (Random) returns its index into `feasible`; -1 means
  // "use the scores".
  virtual bool picks() const { return false; }
  virtual int Pick(const std::vector<NodeId>& /*feasible*/) { return -1; }
  // Called after a node's state changed (commit or release) and after nodes were added.
  virtual void OnNodeChanged(NodeId /*node*/) {}
  virtual void OnNodesAdded() {}
  // A sentence for explanations: what the score means.
  virtual std::string Describe(const NodeChoice& choice) const;
};

// The names MakePolicy accepts, in the order the simulator reports them.
const std::vector<std::string>& PolicyNames();
// Whether `name` is one of them; the names joined for messages ("random, dotprod, ...").
bool IsPolicyName(std::string_view name);
std::string JoinedPolicyNames(std::string_view separator = ", ");

// `cluster`, `workload` and `rng` must outlive the policy. `workload` is the target workload
// of fgd and default (the distribution of past pods); `rng` drives random's choices.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const ClusterState& cluster,
                                           const TargetWorkload& workload,
                                           const PolicyOptions& options, Rng* rng);

}  // namespace gpushare::placement
