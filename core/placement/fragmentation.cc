#include "core/placement/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpushare::placement {
namespace {

std::string JoinModels(const std::vector<std::string>& models) {
  std::string s;
  for (size_t i = 0; i < models.size(); ++i) s += (i ? "|" : "") + models[i];
  return s;
}

}  // namespace

TargetShape ShapeOf(const PodRequest& pod) {
  TargetShape t;
  t.cpu_milli = pod.cpu_milli;
  t.num_gpus = static_cast<int>(pod.gpus.size());
  bool any_share = false;
  int64_t smallest = 0;
  for (const auto& d : pod.gpus) {
    if (d.whole) continue;
    smallest = any_share ? std::min(smallest, d.share) : d.share;
    any_share = true;
  }
  t.whole = t.num_gpus > 0 && !any_share;
  t.share = any_share ? smallest : 0;
  if (t.num_gpus > 0)
    for (const auto& m : pod.gpu_models)
      if (!m.empty()) t.models.push_back(m);
  return t;
}

void ResolveModels(TargetWorkload& workload, const ClusterState& cluster) {
  for (auto* list : {&workload.shapes, &workload.all_shapes})
    for (auto& s : *list) {
      s.any_model = s.models.empty();
      s.model_mask = s.any_model ? ~0ULL : 0ULL;
      for (const auto& m : s.models) {
        const int id = cluster.ModelId(m);
        if (id >= 0) s.model_mask |= 1ULL << id;
      }
    }
}

TargetWorkload BuildTargetWorkload(const std::vector<PodRequest>& pods, const ClusterState& cluster,
                                   const WorkloadOptions& options) {
  std::vector<WeightedRequest> weighted;
  weighted.reserve(pods.size());
  for (const auto& p : pods) weighted.push_back({p, 1});
  return BuildTargetWorkload(weighted, cluster, options);
}

TargetWorkload BuildTargetWorkload(const std::vector<WeightedRequest>& pods,
                                   const ClusterState& cluster, const WorkloadOptions& options) {
  // Key: (cpu, share-or-whole, gpus, models). "Whole" sorts above every share, as gpu_milli=1000
  // sorts above every sharing value in the reference.
  using Key = std::tuple<int64_t, int64_t, int, std::string>;
  std::map<Key, std::pair<int64_t, TargetShape>> counts;
  int64_t total = 0;
  for (const auto& [p, count] : pods) {
    if (count <= 0) continue;
    total += count;
    TargetShape t = ShapeOf(p);
    const int64_t share_key = t.whole ? INT64_MAX : t.share;
    Key k{t.cpu_milli, share_key, t.num_gpus, JoinModels(t.models)};
    auto it = counts.find(k);
    if (it == counts.end()) {
      counts.emplace(k, std::make_pair(count, std::move(t)));
    } else {
      it->second.first += count;
    }
  }
  std::vector<std::pair<Key, std::pair<int64_t, TargetShape>>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;  // larger cpu, then share, gpus, models
  });
  TargetWorkload w;
  w.observed_pods = total;
  w.distinct_shapes = static_cast<int>(sorted.size());
  const double need = options.popularity * static_cast<double>(total);
  int64_t covered = 0;
  for (auto& [key, entry] : sorted) {
    TargetShape t = std::move(entry.second);
    t.count = entry.first;
    t.weight = static_cast<double>(t.count) / static_cast<double>(total);
    w.all_shapes.push_back(t);
    if (static_cast<double>(covered) >= need && !w.shapes.empty()) continue;
    covered += t.count;
    w.shapes.push_back(std::move(t));
  }
  w.coverage = total == 0 ? 0 : static_cast<double>(covered) / static_cast<double>(total);
  for (auto& s : w.shapes)
    s.weight = covered > 0 ? static_cast<double>(s.count) / static_cast<double>(covered) : 0;
  ResolveModels(w, cluster);
  return w;
}

int64_t ShapeFragmentation(const NodeState& node, const TargetShape& shape) {
  const int64_t idle = node.gpu_free_total;
  if (shape.num_gpus == 0) return idle;
  if (node.num_gpus == 0) return 0;
  if (!shape.any_model && (node.model < 0 || !((shape.model_mask >> node.model) & 1ULL)))
    return idle;
  if (node.cpu_free < shape.cpu_milli) return idle;
  int usable = 0;
  int64_t stranded = 0;
  for (int g = 0; g < node.num_gpus; ++g) {
    const bool ok = shape.whole ? node.GpuFullyFree(g) : node.GpuTakesShare(g, shape.share);
    if (ok) {
      ++usable;
    } else {
      stranded += node.gpu_free[g];
    }
  }
  if (usable < shape.num_gpus) return idle;
  return stranded;
}

double NodeFragmentation(const NodeState& node, const TargetWorkload& workload) {
  double f = 0;
  for (const auto& s : workload.shapes)
    f += s.weight * static_cast<double>(ShapeFragmentation(node, s));
  return f;
}

}  // namespace gpushare::placement
