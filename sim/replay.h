// The pure half of `gpushare replay` (cli/gpushare/replay.cc does the API calls): the order in
// which `gpushare simulate` submits a trace's pods for a seed, the pod each task becomes, and
// the tally of what the cluster did with them.
//
// The tally keeps a mirror of the cluster built from the same node list as the simulator and
// fed only with what the cluster reports (each pod's node and the GPUs in its gpushare
// annotations), so its figures are the cluster's, measured the way the simulator measures its
// own: arrived and allocated GPU (milli-GPU) after every pod, binned by arrived percent, and
// FGD's fragmentation with the trace's typical pods. A placement the mirror cannot take (a GPU
// booked past its capacity, a whole GPU that was not free) is counted as an over-commit, never
// hidden.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/fragmentation.h"
#include "core/placement/pod.h"
#include "core/status.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace gpushare::sim {

// The trace pods' indices in the order RunOne submits them for `seed` (sorted by name, shuffled,
// inflated to `tune` x the node list's GPU capacity): the same draws from the same Rng.
std::vector<int> SubmitOrder(const Workload& workload, uint64_t seed, double tune);

// A trace task as a pod (docs/memory-shares.md, "Fractions and whole GPUs"): CPU and memory
// requests, alibabacloud.com/gpu-milli num_gpu x gpu_milli, the allowed models as a node
// affinity on alibabacloud.com/gpu-card-model. Returned as JSON text (the caller parses it).
struct ReplayPodSpec {
  std::string name, namespace_;
  std::map<std::string, std::string> labels;
  std::string image = "registry.k8s.io/pause:3.10";
  std::string scheduler_name;  // empty: the cluster's default
};
std::string ReplayPodJson(const TracePod& pod, const ReplayPodSpec& spec);

// Where the cluster put one pod: its node and the GPU indices its containers' demands hold
// (gpushare.io/gpu-mem-assumed, every key); an empty node: refused (unschedulable).
struct Observed {
  std::string node;
  std::vector<int> gpus;
};

class ReplayTally {
 public:
  ReplayTally(const Workload& workload, const placement::TargetWorkload& typical);
  Status status() const { return status_; }  // not OK when the node list cannot be modelled

  // One pod's outcome, in submit order. An error says what the cluster did that the mirror
  // cannot take (unknown node, over-commit); the pod then counts as placed with nothing booked.
  Status Record(int pod_index, const Observed& where);

  int64_t capacity() const { return capacity_; }
  int64_t overcommits() const { return overcommits_; }
  int64_t placed() const { return placed_; }
  int64_t refused() const { return refused_; }
  // The run's result (curve, counts), labelled with `policy` and `seed`.
  RunResult Finish(const std::string& policy, uint64_t seed, double seconds) const;

 private:
  const Workload& workload_;
  const placement::TargetWorkload& typical_;
  Status status_;
  placement::ClusterState cluster_;
  std::map<std::string, placement::NodeId> by_name_;
  std::vector<double> node_frag_;
  double frag_total_ = 0;
  int64_t capacity_ = 0, arrived_ = 0;
  int64_t placed_ = 0, refused_ = 0, overcommits_ = 0, failed_demand_ = 0;
  std::vector<Sample> samples_;
};

}  // namespace gpushare::sim
