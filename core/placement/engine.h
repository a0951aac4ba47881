// PlacementEngine: filter, score and place pods on a ClusterState with one Policy.
//
// The one engine behind the scheduler extender and the simulator:
//   - Evaluate(pod, candidates): for each candidate node, either the reason it cannot take the
//     pod, or the policy's score and GPU choice (the extender's filter and prioritize);
//   - Choose(pod[, candidates]): the winning node and its GPUs, with counts of why the others
//     were refused (the extender's bind, the simulator's step);
//   - Commit / Release: book and give back a placement; the state changes incrementally.
//
// Pod requests are interned into shapes once (Intern); all calls take the ShapeId. For
// node-local policies the engine caches each node's verdict per shape until that node's version
// changes, so placing one pod costs a scan over the nodes plus a re-evaluation of the nodes that
// changed since the shape was last seen.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/pod.h"
#include "core/placement/policy.h"
#include "core/status.h"

namespace gpushare::placement {

using ShapeId = int32_t;

struct EngineOptions {
  bool cache = true;                    // cache node-local verdicts per (shape, node)
  int64_t max_cache_entries = 4 << 20;  // beyond this, further shapes are not cached
};

struct Verdict {
  NodeId node = -1;
  Rejection rejection = Rejection::kNone;
  NodeChoice choice;  // when rejection == kNone (scores normalised when the policy normalises)
};

inline constexpr int kNumRejections = 10;

struct Decision {
  NodeId node = -1;  // -1: no node can take the pod
  NodeChoice choice;
  int feasible = 0;  // nodes that could take the pod
  int tied = 0;      // feasible nodes with the winning score (the tie rank decided among them)
  std::array<int, kNumRejections> rejected{};  // refused nodes by Rejection

  bool placed() const { return node >= 0; }
};

class PlacementEngine {
 public:
  // `cluster` and `policy` must outlive the engine; the policy must read this cluster.
  PlacementEngine(ClusterState& cluster, Policy& policy, EngineOptions options = {});

  // Validates and interns a request; equal requests get the same id.
  Result<ShapeId> Intern(const PodRequest& request);
  const PodShape& shape(ShapeId id) const { return shapes_[id]; }
  int num_shapes() const { return static_cast<int>(shapes_.size()); }

  // Filter and score `pod` on each candidate, in candidate order.
  std::vector<Verdict> Evaluate(ShapeId pod, const std::vector<NodeId>& candidates);
  // The winner over all nodes, or over the candidates.
  Decision Choose(ShapeId pod);
  Decision Choose(ShapeId pod, const std::vector<NodeId>& candidates);
  // The same Decision as Choose(pod, candidates), from the verdicts Evaluate(pod, candidates)
  // has just returned (nothing changed in between), without checking and scoring every
  // candidate a second time. A policy that picks at random picks among the feasible verdicts
  // (from its stream as Evaluate left it, so not the node Choose would have drawn).
  Decision ChooseEvaluated(ShapeId pod, const std::vector<Verdict>& verdicts);

  // Books the pod where a Choose() put it (or on an explicit node and GPUs).
  Result<PlacementId> Commit(ShapeId pod, const Decision& decision);
  Result<PlacementId> Commit(ShapeId pod, NodeId node, const GpuAssignment& gpus);
  Status Release(PlacementId id);

  // Call after adding nodes to the cluster (the engine, the shapes and the policy catch up).
  void NodesAdded();

  // An operator-readable account of a decision: where and why, or why nothing fits.
  std::string Explain(ShapeId pod, const Decision& decision) const;

  // Scores of feasible verdicts mapped to integers 0..max_score: min-max of Score::value, or of
  // Score::tiebreak when every value ties, max_score when both tie; -1 for infeasible ones.
  // For scheduler extenders (0..10; GpuCache::Score).
  static std::vector<int> ScaleScores(const std::vector<Verdict>& verdicts, int max_score = 10);

  ClusterState& cluster() { return cluster_; }
  Policy& policy() { return policy_; }

 private:
  struct CacheEntry {
    uint32_t version = 0;  // 0: empty (node versions start at 1)
    NodeChoice choice;
  };
  template <typename NodeList>
  Decision ChooseAmong(ShapeId pod, const NodeList& nodes, int count);
  void PickAmongFeasible(ShapeId pod, Decision& d);  // for policies that pick: from feasible_
  const NodeChoice& Cached(ShapeId pod, NodeId node);
  void Changed(NodeId node);

  ClusterState& cluster_;
  Policy& policy_;
  EngineOptions options_;
  std::vector<PodShape> shapes_;
  std::unordered_map<std::string, ShapeId> shape_ids_;
  std::vector<std::vector<CacheEntry>> cache_;
  int64_t cache_entries_ = 0;
  NodeChoice scratch_;
  int models_seen_ = 0;
  std::vector<NodeId> feasible_;
  std::vector<Score> scores_;
};

}  // namespace gpushare::placement
