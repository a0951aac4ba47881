// PodRequest and PodShape: what a pod asks the placement engine for, and whether a node fits it.
//
// A pod asks for CPU (milli-cores), memory (MiB) and a list of GPU demands. A demand is either a
// whole GPU (an entirely free GPU, taken completely) or a share of one GPU in the cluster's unit
// (milli-GPU, MiB of memory, ...). A trace task with num_gpu=k, gpu_milli=1000 is k whole
// demands; a sharing task (num_gpu=1, gpu_milli<1000) is one share demand; an
// `aliyun.com/gpu-mem` pod with several containers is one share demand per container, and
// `distinct_gpus=false` lets two containers land on the same GPU. Allowed GPU models restrict
// pods that use GPUs (CPU-only pods ignore them, as in the reference simulator).
//
// PodShape is the request compiled against a cluster's model list: the form every check and
// policy works on. CheckFit() is the hard filter, with one Rejection reason per refused node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/placement/cluster.h"
#include "core/status.h"

namespace gpushare::placement {

struct GpuDemand {
  int64_t share = 0;   // amount of one GPU, in the cluster's unit (ignored when whole)
  bool whole = false;  // needs an entirely free GPU and takes all of it
};

struct PodRequest {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuDemand> gpus;          // one entry per GPU the pod needs
  bool distinct_gpus = true;            // sharing demands must land on different GPUs
  std::vector<std::string> gpu_models;  // allowed GPU models; empty: any
};

// A trace-style request: num_gpus GPUs with share_per_gpu each; share_per_gpu >= whole_unit
// (1000 for milli-GPU) means whole GPUs. `models` is a '|'-separated list, empty entries ignored.
PodRequest MakePodRequest(int64_t cpu_milli, int64_t memory_mib, int num_gpus,
                          int64_t share_per_gpu, std::string_view models = {},
                          int64_t whole_unit = 1000);

// A compiled request: what it takes from a node (the PodResources it commits; shares sorted
// largest first, which is the order an assignment lists them in) and where it may go.
struct PodShape : PodResources {
  bool distinct_gpus = true;
  bool any_model = true;                 // no model constraint (or a CPU-only pod)
  uint64_t model_mask = ~0ULL;           // allowed model ids (bit i = ClusterState::models()[i])
  std::vector<std::string> model_names;  // as requested, for messages and re-resolution

  int num_gpus() const { return num_whole + static_cast<int>(shares.size()); }
  bool cpu_only() const { return num_gpus() == 0; }
  bool single_share() const { return num_whole == 0 && shares.size() == 1; }
  bool ModelAllowed(int model) const {
    return any_model || (model >= 0 && ((model_mask >> model) & 1ULL));
  }
  const PodResources& resources() const { return *this; }
  std::string ToString() const;  // e.g. "cpu=3150m mem=0MiB gpus=1x810"
};

// Validates and compiles a request against `cluster`'s GPU models. Unknown models are kept by
// name (they match no node until one with that model is added; see ResolveModels()).
Result<PodShape> CompileShape(const PodRequest& request, const ClusterState& cluster);
// Recomputes model_mask after the cluster learnt new models.
void ResolveModels(PodShape& shape, const ClusterState& cluster);

// Why a node cannot take a pod. kNone means it can.
enum class Rejection : uint8_t {
  kNone = 0,
  kGpuModel,     // the node's GPU model is not among the allowed ones
  kNoGpus,       // the pod needs GPUs and the node has none
  kCpu,          // not enough free CPU
  kMemory,       // not enough free memory
  kPodLimit,     // the node's pod limit is reached
  kWholeGpus,    // fewer entirely free GPUs than whole-GPU demands
  kGpuShare,     // no GPU (or not enough GPUs) with the share free
  kClientLimit,  // GPUs with room have reached the sharing-client ceiling
  kUnknownNode,  // the node id does not exist (Evaluate with a stale candidate)
};
std::string_view RejectionName(Rejection r);

// The hard filter: the same checks Commit() enforces.
Rejection CheckFit(const NodeState& node, const PodShape& pod);
// CheckFit() plus an operator-readable sentence with the numbers, e.g.
// "insufficient CPU: 2000m free, 3150m requested".
std::string ExplainRejection(const NodeState& node, const PodShape& pod,
                             const ClusterState& cluster);

// The reference's default GPU choice ("best"): whole GPUs are the lowest-indexed entirely free
// ones; each share goes to the fitting GPU with the least free share (ties: lowest index).
// Returns false when the pod does not fit the node's GPUs.
bool BestFitAssignment(const NodeState& node, const PodShape& pod, GpuAssignment* out);

// Calls fn(const GpuAssignment&) for each candidate GPU choice worth scoring: for a single
// share, one per fitting GPU, skipping GPUs identical (capacity, free, clients) to an earlier one;
// otherwise the single BestFitAssignment(). Calls nothing when the pod does not fit.
template <typename Fn>
void ForEachAssignment(const NodeState& node, const PodShape& pod, Fn&& fn) {
  if (pod.single_share()) {
    const int64_t d = pod.shares[0];
    for (int g = 0; g < node.num_gpus; ++g) {
      if (!node.GpuTakesShare(g, d)) continue;
      bool seen = false;
      for (int h = 0; h < g && !seen; ++h)
        seen = node.gpu_free[h] == node.gpu_free[g] &&
               node.gpu_capacity[h] == node.gpu_capacity[g] &&
               node.gpu_clients[h] == node.gpu_clients[g] && node.GpuTakesShare(h, d);
      if (seen) continue;
      GpuAssignment a;
      a.Add(g);
      fn(a);
    }
    return;
  }
  GpuAssignment a;
  if (BestFitAssignment(node, pod, &a)) fn(a);
}

// The node as it would be after placing `pod` with `gpus` (no validation: gpus must come from
// ForEachAssignment/BestFitAssignment on the same node).
NodeState Apply(const NodeState& node, const PodShape& pod, const GpuAssignment& gpus);

}  // namespace gpushare::placement
