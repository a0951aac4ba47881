#include "core/placement/engine.h"

#include <algorithm>
#include <cmath>

namespace gpushare::placement {
namespace {

std::string ShapeKey(const PodShape& s) {
  std::string k = std::to_string(s.cpu_milli) + "/" + std::to_string(s.memory_mib) + "/" +
                  std::to_string(s.num_whole) + "/" + (s.distinct_gpus ? "d" : "s");
  for (int64_t v : s.shares) k += "," + std::to_string(v);
  k += "/";
  for (const auto& m : s.model_names) k += m + "|";
  return k;
}

bool SameScore(const Score& a, const Score& b) {
  return a.value == b.value && a.tiebreak == b.tiebreak;
}

}  // namespace

PlacementEngine::PlacementEngine(ClusterState& cluster, Policy& policy, EngineOptions options)
    : cluster_(cluster), policy_(policy), options_(options) {
  models_seen_ = static_cast<int>(cluster_.models().size());
}

Result<ShapeId> PlacementEngine::Intern(const PodRequest& request) {
  GPUSHARE_ASSIGN_OR_RETURN(PodShape shape, CompileShape(request, cluster_));
  std::string key = ShapeKey(shape);
  auto it = shape_ids_.find(key);
  if (it != shape_ids_.end()) return it->second;
  const ShapeId id = static_cast<ShapeId>(shapes_.size());
  shapes_.push_back(std::move(shape));
  shape_ids_.emplace(std::move(key), id);
  cache_.emplace_back();
  return id;
}

void PlacementEngine::NodesAdded() {
  if (static_cast<int>(cluster_.models().size()) != models_seen_) {
    for (auto& s : shapes_) ResolveModels(s, cluster_);
    models_seen_ = static_cast<int>(cluster_.models().size());
  }
  for (auto& c : cache_) {
    if (c.empty()) continue;
    cache_entries_ -= static_cast<int64_t>(c.size());
    c.assign(cluster_.num_nodes(), CacheEntry{});
    cache_entries_ += static_cast<int64_t>(c.size());
  }
  policy_.OnNodesAdded();
}

const NodeChoice& PlacementEngine::Cached(ShapeId pod, NodeId node) {
  const NodeState& s = cluster_.node(node);
  if (options_.cache && policy_.node_local()) {
    auto& row = cache_[pod];
    if (row.empty() && cache_entries_ + cluster_.num_nodes() <= options_.max_cache_entries) {
      row.assign(cluster_.num_nodes(), CacheEntry{});
      cache_entries_ += cluster_.num_nodes();
    }
    if (!row.empty()) {
      CacheEntry& e = row[node];
      if (e.version != s.version) {
        e.choice = policy_.Evaluate(node, shapes_[pod]);
        e.version = s.version;
      }
      return e.choice;
    }
  }
  scratch_ = policy_.Evaluate(node, shapes_[pod]);
  return scratch_;
}

std::vector<Verdict> PlacementEngine::Evaluate(ShapeId pod, const std::vector<NodeId>& candidates) {
  std::vector<Verdict> out;
  out.reserve(candidates.size());
  std::vector<Score> scores;
  std::vector<size_t> feasible;
  for (NodeId n : candidates) {
    Verdict v;
    v.node = n;
    if (n < 0 || n >= cluster_.num_nodes()) {
      v.rejection = Rejection::kUnknownNode;
      out.push_back(v);
      continue;
    }
    v.rejection = CheckFit(cluster_.node(n), shapes_[pod]);
    if (v.rejection == Rejection::kNone) {
      v.choice = Cached(pod, n);
      feasible.push_back(out.size());
      scores.push_back(v.choice.score);
    }
    out.push_back(v);
  }
  if (policy_.normalizes()) {
    policy_.Normalize(scores);
    for (size_t i = 0; i < feasible.size(); ++i) out[feasible[i]].choice.score = scores[i];
  }
  return out;
}

namespace {

// Offers node `n` with `choice` to the decision: the best score wins, the smallest tie rank
// breaks ties (`best_rank` is the current winner's).
void Consider(Decision& d, NodeId n, const NodeChoice& choice, int64_t rank, int64_t& best_rank) {
  if (d.node < 0 || Better(choice.score, d.choice.score)) {
    d.node = n;
    d.choice = choice;
    d.tied = 1;
    best_rank = rank;
  } else if (SameScore(choice.score, d.choice.score)) {
    ++d.tied;
    if (rank < best_rank) {
      d.node = n;
      d.choice = choice;
      best_rank = rank;
    }
  }
}

}  // namespace

void PlacementEngine::PickAmongFeasible(ShapeId pod, Decision& d) {
  if (feasible_.empty()) return;
  const int idx = policy_.Pick(feasible_);
  if (idx >= 0 && idx < static_cast<int>(feasible_.size())) {
    d.node = feasible_[idx];
    d.choice = policy_.Evaluate(d.node, shapes_[pod]);
    d.tied = 1;
  }
}

template <typename NodeList>
Decision PlacementEngine::ChooseAmong(ShapeId pod, const NodeList& nodes, int count) {
  Decision d;
  const PodShape& shape = shapes_[pod];
  const bool picks = policy_.picks();
  const bool normalizes = policy_.normalizes();
  feasible_.clear();
  scores_.clear();
  std::vector<NodeChoice> choices;
  int64_t best_rank = 0;
  for (int i = 0; i < count; ++i) {
    const NodeId n = nodes(i);
    const Rejection r = CheckFit(cluster_.node(n), shape);
    if (r != Rejection::kNone) {
      ++d.rejected[static_cast<int>(r)];
      continue;
    }
    ++d.feasible;
    if (picks) {
      feasible_.push_back(n);
      continue;
    }
    const NodeChoice& c = Cached(pod, n);
    if (normalizes) {
      feasible_.push_back(n);
      scores_.push_back(c.score);
      choices.push_back(c);
      continue;
    }
    Consider(d, n, c, cluster_.tie_rank(n), best_rank);
  }
  if (picks) {
    PickAmongFeasible(pod, d);
  } else if (normalizes && !feasible_.empty()) {
    policy_.Normalize(scores_);
    for (size_t i = 0; i < feasible_.size(); ++i) {
      choices[i].score = scores_[i];
      Consider(d, feasible_[i], choices[i], cluster_.tie_rank(feasible_[i]), best_rank);
    }
  }
  return d;
}

Decision PlacementEngine::ChooseEvaluated(ShapeId pod, const std::vector<Verdict>& verdicts) {
  Decision d;
  const bool picks = policy_.picks();
  feasible_.clear();
  int64_t best_rank = 0;
  for (const Verdict& v : verdicts) {
    if (v.rejection == Rejection::kUnknownNode) continue;  // Choose drops such candidates
    if (v.rejection != Rejection::kNone) {
      ++d.rejected[static_cast<int>(v.rejection)];
      continue;
    }
    ++d.feasible;
    if (picks) {
      feasible_.push_back(v.node);
    } else {
      Consider(d, v.node, v.choice, cluster_.tie_rank(v.node),
               best_rank);  // scores already normalised
    }
  }
  if (picks) PickAmongFeasible(pod, d);
  return d;
}

Decision PlacementEngine::Choose(ShapeId pod) {
  return ChooseAmong(
      pod, [](int i) { return static_cast<NodeId>(i); }, cluster_.num_nodes());
}

Decision PlacementEngine::Choose(ShapeId pod, const std::vector<NodeId>& candidates) {
  std::vector<NodeId> valid;
  valid.reserve(candidates.size());
  for (NodeId n : candidates)
    if (n >= 0 && n < cluster_.num_nodes()) valid.push_back(n);
  return ChooseAmong(
      pod, [&](int i) { return valid[i]; }, static_cast<int>(valid.size()));
}

Result<PlacementId> PlacementEngine::Commit(ShapeId pod, const Decision& decision) {
  if (!decision.placed()) return Status::FailedPrecondition("the decision placed the pod nowhere");
  return Commit(pod, decision.node, decision.choice.gpus);
}

Result<PlacementId> PlacementEngine::Commit(ShapeId pod, NodeId node, const GpuAssignment& gpus) {
  if (pod < 0 || pod >= num_shapes())
    return Status::NotFound("unknown shape id " + std::to_string(pod));
  if (node < 0 || node >= cluster_.num_nodes())
    return Status::NotFound("node id " + std::to_string(node) + " out of range");
  const PodShape& s = shapes_[pod];
  if (CheckFit(cluster_.node(node), s) != Rejection::kNone)
    return Status::ResourceExhausted("node '" + cluster_.node_name(node) +
                                     "': " + ExplainRejection(cluster_.node(node), s, cluster_));
  Result<PlacementId> id = cluster_.Commit(s.resources(), node, gpus);
  if (id.ok()) Changed(node);
  return id;
}

Status PlacementEngine::Release(PlacementId id) {
  const NodeId node = cluster_.PlacementNode(id);
  Status st = cluster_.Release(id);
  if (st.ok()) Changed(node);
  return st;
}

void PlacementEngine::Changed(NodeId node) {
  policy_.OnNodeChanged(node);
}

std::string PlacementEngine::Explain(ShapeId pod, const Decision& d) const {
  const PodShape& s = shapes_[pod];
  std::string out;
  if (d.placed()) {
    out = "placed " + s.ToString() + " on node " + cluster_.node_name(d.node);
    if (d.choice.gpus.count > 0) {
      out += " GPUs [";
      for (int i = 0; i < d.choice.gpus.count; ++i)
        out += (i ? "," : "") + std::to_string(d.choice.gpus.gpu[i]);
      out += "]";
    }
    out +=
        ": " + policy_.Describe(d.choice) + "; " + std::to_string(d.feasible) + " feasible node(s)";
    if (d.tied > 1) out += ", " + std::to_string(d.tied) + " tied (node order decided)";
  } else {
    out = "no node fits " + s.ToString();
  }
  std::string refused;
  for (int r = 1; r < kNumRejections; ++r) {
    if (d.rejected[r] == 0) continue;
    refused += (refused.empty() ? "" : ", ") + std::to_string(d.rejected[r]) + " " +
               std::string(RejectionName(static_cast<Rejection>(r)));
  }
  if (!refused.empty()) out += "; refused: " + refused;
  return out;
}

namespace {

// The range of one part of the feasible verdicts' scores.
struct Range {
  double lo = 0, hi = 0;
  void Add(double x, bool first) {
    lo = first ? x : std::min(lo, x);
    hi = first ? x : std::max(hi, x);
  }
  double Fraction(double x) const { return (x - lo) / (hi - lo); }
};

}  // namespace

std::vector<int> PlacementEngine::ScaleScores(const std::vector<Verdict>& verdicts, int max_score) {
  std::vector<int> out(verdicts.size(), -1);
  Range value, tiebreak;
  bool any = false;
  for (const auto& v : verdicts) {
    if (v.rejection != Rejection::kNone) continue;
    value.Add(v.choice.score.value, !any);
    tiebreak.Add(v.choice.score.tiebreak, !any);
    any = true;
  }
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (verdicts[i].rejection != Rejection::kNone) continue;
    const Score& s = verdicts[i].choice.score;
    double f = 1.0;
    if (value.hi > value.lo) {
      f = value.Fraction(s.value);
    } else if (tiebreak.hi > tiebreak.lo) {
      f = tiebreak.Fraction(s.tiebreak);
    }
    out[i] = static_cast<int>(std::lround(f * max_score));
  }
  return out;
}

}  // namespace gpushare::placement
