#include "core/placement/policy_default.h"

#include <cmath>

namespace gpushare::placement {
namespace {

class DefaultPolicy final : public Policy {
 public:
  DefaultPolicy(const ClusterState& c, const TargetWorkload& w, const PolicyOptions& o)
      : cluster_(c), options_(o) {
    workload_.shapes = w.all_shapes.empty() ? w.shapes : w.all_shapes;
    double total = 0;
    for (auto& s : workload_.shapes) total += s.weight;
    for (auto& s : workload_.shapes) s.weight = total > 0 ? s.weight / total : 0;
    OnNodesAdded();
  }
  std::string_view name() const override { return "default"; }
  void OnNodesAdded() override {
    frag_.resize(cluster_.num_nodes());
    version_.resize(cluster_.num_nodes(), 0);
  }
  NodeChoice Evaluate(NodeId n, const PodShape& pod) override {
    const NodeState& s = cluster_.node(n);
    if (version_[n] != s.version) {
      frag_[n] = NodeFragmentation(s, workload_);
      version_[n] = s.version;
    }
    const double unit = static_cast<double>(options_.gpu_unit);
    NodeChoice best;
    bool have = false;
    ForEachAssignment(s, pod, [&](const GpuAssignment& a) {
      const NodeState after = Apply(s, pod, a);
      const double delta = (NodeFragmentation(after, workload_) - frag_[n]) / unit;
      Score sc;
      sc.value = -delta;
      sc.tiebreak = -static_cast<double>(after.gpu_free_total) / unit;
      if (!have || Better(sc, best.score)) {
        best.score = sc;
        best.gpus = a;
        best.detail = delta;
        have = true;
      }
    });
    return best;
  }

 private:
  const ClusterState& cluster_;
  PolicyOptions options_;
  TargetWorkload workload_;
  std::vector<double> frag_;
  std::vector<uint32_t> version_;
};

}  // namespace

Result<std::unique_ptr<Policy>> MakeDefaultPolicy(const ClusterState& cluster, const TargetWorkload& workload,
                                                  const PolicyOptions& options) {
  return std::unique_ptr<Policy>(new DefaultPolicy(cluster, workload, options));
}

}  // namespace gpushare::placement
