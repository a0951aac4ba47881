// Fragmentation: how much of a node's idle GPU capacity a target workload cannot use.
//
// This is the measure of FGD (Weng et al., USENIX ATC '23) as its simulator implements it. A
// target workload M is a list of task shapes m with popularities p_m. For a node n with idle GPU
// I_n (the sum of free shares), the capacity stranded from m's point of view is
//   F_n(m) = I_n                      if m uses no GPU, the model does not match, or m does not
//                                     fit (too little CPU, or fewer usable GPUs than m needs);
//          = sum of free shares of the GPUs m cannot use   otherwise,
// where a GPU is usable by m when it has m's per-GPU share free (below the client ceiling), or is
// entirely free for a whole-GPU shape. Memory is not part of the measure. The node's expected
// fragmentation is F_n(M) = sum_m p_m F_n(m), and the cluster's is the sum over nodes.
//
// BuildTargetWorkload() derives M from observed pods the way the reference does: count the
// distinct (cpu, gpus, share, model list) shapes, sort by count (ties: larger cpu, share, gpus,
// model list first), keep the most popular ones until they cover `popularity` of the pods, and
// renormalise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/pod.h"

namespace gpushare::placement {

struct TargetShape {
  int64_t cpu_milli = 0;
  int num_gpus = 0;                 // GPUs per task; 0 for CPU-only shapes
  int64_t share = 0;                // per-GPU share (unused when whole)
  bool whole = false;               // needs entirely free GPUs
  std::vector<std::string> models;  // allowed models, empty: any
  bool any_model = true;
  uint64_t model_mask = ~0ULL;
  int64_t count = 0;  // occurrences among the observed pods
  double weight = 0;  // p_m; the kept shapes' weights sum to 1
};

struct TargetWorkload {
  std::vector<TargetShape> shapes;      // the typical shapes (popularity cut), weights sum to 1
  std::vector<TargetShape> all_shapes;  // every observed shape, weights = count / observed_pods
  int64_t observed_pods = 0;            // pods counted
  int distinct_shapes = 0;              // before the popularity cut
  double coverage = 0;                  // fraction of observed pods the kept shapes account for
};

struct WorkloadOptions {
  double popularity = 0.95;  // keep the most popular shapes up to this fraction of pods
};

// The shape a request contributes to a target workload. Pods with several share demands count
// as num_gpus = demands with the smallest share.
TargetShape ShapeOf(const PodRequest& pod);

TargetWorkload BuildTargetWorkload(const std::vector<PodRequest>& pods, const ClusterState& cluster,
                                   const WorkloadOptions& options = {});
// The same with each request standing for `count` pods (counts > 0; a sum up to 2^62).
struct WeightedRequest {
  PodRequest pod;
  int64_t count = 1;
};
TargetWorkload BuildTargetWorkload(const std::vector<WeightedRequest>& pods,
                                   const ClusterState& cluster,
                                   const WorkloadOptions& options = {});
// Recomputes the model masks after the cluster learnt new models.
void ResolveModels(TargetWorkload& workload, const ClusterState& cluster);

// F_n(m), in the cluster's share unit.
int64_t ShapeFragmentation(const NodeState& node, const TargetShape& shape);
// F_n(M).
double NodeFragmentation(const NodeState& node, const TargetWorkload& workload);

// F_n(M) per node, recomputed only when the node's version changed.
class FragmentationCache {
 public:
  double Get(const ClusterState& cluster, NodeId n, const TargetWorkload& workload) {
    if (static_cast<size_t>(n) >= value_.size()) {
      value_.resize(cluster.num_nodes());
      version_.resize(cluster.num_nodes(), 0);
    }
    const NodeState& s = cluster.node(n);
    if (version_[n] != s.version) {
      value_[n] = NodeFragmentation(s, workload);
      version_[n] = s.version;
    }
    return value_[n];
  }

 private:
  std::vector<double> value_;
  std::vector<uint32_t> version_;
};

}  // namespace gpushare::placement
