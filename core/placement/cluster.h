// ClusterState: what the placement engine knows about a cluster, updated one pod at a time.
//
// A cluster is a list of nodes. A node has CPU (milli-cores), memory (MiB), one GPU model and up
// to kMaxGpusPerNode GPUs. Each GPU has a share capacity in an abstract unit chosen by the caller
// (milli-GPU for the Alibaba trace, where 1000 is a whole GPU; MiB of GPU memory for
// `aliyun.com/gpu-mem`, where GPUs of one node may differ in size), the share still free, and the
// number of clients (pods) using it, capped by the node's max_clients_per_gpu.
//
// Commit() books a pod's resources on a node and returns a handle; Release() gives them back
// (pod departure in the simulator's dynamic mode, pod deletion in the scheduler). Both validate
// everything first, so a bad call is an error and never a partial update or an over-commit.
// Every change bumps the node's version, which is how caches (see engine.h) notice it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace gpushare::placement {

inline constexpr int kMaxGpusPerNode = 16;
inline constexpr int kMaxGpuModels = 64;
inline constexpr int kDefaultMaxClientsPerGpu = 48;

using NodeId = int32_t;
using PlacementId = int64_t;

// The pod kinds GpuClustering groups by: one sharing kind, then one kind per whole-GPU count.
inline constexpr int kShareKind = 0;
inline constexpr int kNumPodKinds = kMaxGpusPerNode + 1;  // 0 = share, k = k whole GPUs

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::string gpu_model;              // empty for a node without GPUs
  std::vector<int64_t> gpu_capacity;  // share capacity of each GPU, in the cluster's unit
  int max_clients_per_gpu = kDefaultMaxClientsPerGpu;  // pods that may share one GPU
  int max_pods = 0;                                    // 0: no limit
};

// The GPUs a placement uses on its node, in demand order (see PodShape in pod.h): first the
// whole-GPU demands, then the sharing demands.
struct GpuAssignment {
  uint8_t count = 0;
  std::array<uint8_t, kMaxGpusPerNode> gpu{};

  void Add(int g) { gpu[count++] = static_cast<uint8_t>(g); }
  bool operator==(const GpuAssignment& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count; ++i)
      if (gpu[i] != o.gpu[i]) return false;
    return true;
  }
};

// The live state of one node. Policies read it; only ClusterState writes it.
struct NodeState {
  int64_t cpu_capacity = 0;
  int64_t cpu_free = 0;
  int64_t mem_capacity = 0;
  int64_t mem_free = 0;
  int32_t pods = 0;
  int32_t max_pods = 0;  // 0: no limit
  int16_t model = -1;    // index into ClusterState::models(), -1 without GPUs
  uint8_t num_gpus = 0;
  uint8_t fully_free_gpus = 0;  // GPUs with nothing allocated
  int32_t max_clients = kDefaultMaxClientsPerGpu;
  uint32_t version = 1;  // bumped on every change; never 0
  int64_t gpu_capacity_total = 0;
  int64_t gpu_free_total = 0;
  int64_t max_share_free = 0;  // the largest free share on a GPU below the client ceiling
  std::array<int64_t, kMaxGpusPerNode> gpu_capacity{};
  std::array<int64_t, kMaxGpusPerNode> gpu_free{};
  std::array<int16_t, kMaxGpusPerNode> gpu_clients{};
  std::array<int16_t, kNumPodKinds> kind_pods{};  // GPU pods on the node by kind
  int16_t kinds_present = 0;                      // kinds with at least one pod

  bool GpuFullyFree(int g) const { return gpu_clients[g] == 0 && gpu_free[g] == gpu_capacity[g]; }
  bool GpuTakesShare(int g, int64_t share) const {
    return gpu_free[g] >= share && gpu_clients[g] < max_clients;
  }
};

// Recomputes a node's totals (capacity and free sums, entirely free GPUs, the largest share a
// GPU below the client ceiling can take) from its per-GPU figures. ClusterState keeps its own
// nodes' totals current; this is for a NodeState edited by hand (preemption's what-ifs).
void RefreshTotals(NodeState& s);

// What Commit() needs to know about a pod's resources (PodShape in pod.h converts to this).
struct PodResources {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_whole = 0;            // whole-GPU demands (the first num_whole GPUs of an assignment)
  std::vector<int64_t> shares;  // sharing demands, in assignment order after the whole GPUs
  int kind = -1;                // kShareKind, k for k whole GPUs, -1 for CPU-only pods
};

class ClusterState {
 public:
  ClusterState() = default;

  // Adds a node. Fails on an empty or duplicate name, negative resources, more than
  // kMaxGpusPerNode GPUs, a GPU capacity <= 0, GPUs without a model, or too many models.
  Result<NodeId> AddNode(const NodeSpec& spec);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const NodeState& node(NodeId n) const { return nodes_[n]; }
  const std::string& node_name(NodeId n) const { return names_[n]; }
  // -1 when there is no such node.
  NodeId FindNode(std::string_view name) const;

  // GPU models seen so far, in order of first appearance; NodeState::model indexes this.
  const std::vector<std::string>& models() const { return models_; }
  int ModelId(std::string_view model) const;  // -1 when unknown

  // Ties between equally scored nodes go to the smallest rank (default: the NodeId). The
  // simulator sets a seeded permutation, as the reference simulator does with node names.
  int64_t tie_rank(NodeId n) const { return tie_rank_[n]; }
  void set_tie_rank(NodeId n, int64_t rank) { tie_rank_[n] = rank; }

  // Books `pod` on node n using the GPUs in `gpus` (whole-GPU demands first, then shares).
  // Validates capacity, model-independent limits and the assignment; on error nothing changes.
  Result<PlacementId> Commit(const PodResources& pod, NodeId n, const GpuAssignment& gpus);
  // Gives back everything a Commit() booked. Fails for an unknown or already released handle.
  Status Release(PlacementId id);
  // The node of a live placement, -1 when the handle is not live.
  NodeId PlacementNode(PlacementId id) const;
  int64_t live_placements() const { return live_; }

  // Totals over all nodes, maintained incrementally.
  int64_t gpu_capacity_total() const { return gpu_capacity_total_; }
  int64_t gpu_free_total() const { return gpu_free_total_; }
  int64_t cpu_capacity_total() const { return cpu_capacity_total_; }
  int64_t cpu_free_total() const { return cpu_free_total_; }
  int total_gpus() const { return total_gpus_; }

 private:
  struct Booking {
    NodeId node = -1;
    uint32_t generation = 0;
    int64_t cpu = 0;
    int64_t mem = 0;
    int kind = -1;
    uint8_t count = 0;
    std::array<uint8_t, kMaxGpusPerNode> gpu{};
    std::array<int64_t, kMaxGpusPerNode> amount{};
  };
  void Refresh(NodeState& s);
  const Booking* FindBooking(PlacementId id) const;

  std::vector<NodeState> nodes_;
  std::vector<std::string> names_;
  std::vector<int64_t> tie_rank_;
  std::unordered_map<std::string, NodeId> by_name_;
  std::vector<std::string> models_;
  std::vector<Booking> bookings_;
  std::vector<PlacementId> free_bookings_;
  int64_t live_ = 0;
  int64_t gpu_capacity_total_ = 0;
  int64_t gpu_free_total_ = 0;
  int64_t cpu_capacity_total_ = 0;
  int64_t cpu_free_total_ = 0;
  int total_gpus_ = 0;
};

}  // namespace gpushare::placement
