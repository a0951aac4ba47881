#include "core/placement/policy_default.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/placement/share_prices.h"

namespace gpushare::placement {
namespace {

class DefaultPolicy final : public Policy {
 public:
  DefaultPolicy(const ClusterState& c, const TargetWorkload& w, const PolicyOptions& o,
                const DefaultPolicyOptions& t)
      : cluster_(c), workload_(w), options_(o), tuning_(t), unit_(static_cast<double>(o.gpu_unit)) {
    // Share sizes and their counts, one item per share demand.
    for (const auto& s : w.all_shapes) {
      if (s.num_gpus == 0 || s.whole) continue;
      share_counts_[s.share] += static_cast<double>(s.count) * s.num_gpus;
    }
    // CPU per GPU of past GPU pods (a share counts share / gpu_unit GPUs).
    double cpu = 0, gpu = 0;
    for (const auto& s : w.all_shapes) {
      if (s.num_gpus == 0) continue;
      cpu += static_cast<double>(s.count) * static_cast<double>(s.cpu_milli);
      gpu += static_cast<double>(s.count) * s.num_gpus *
             (s.whole ? 1.0 : static_cast<double>(s.share) / unit_);
    }
    rho_ = gpu > 0 ? cpu / gpu : 0;
    OnNodesAdded();
  }

  std::string_view name() const override { return "default"; }

  void OnNodesAdded() override {
    if (rho_ <= 0 && cluster_.total_gpus() > 0)
      rho_ = static_cast<double>(cluster_.cpu_capacity_total()) /
             static_cast<double>(cluster_.total_gpus());
    // Model scarcity: the share of each model's capacity claimed by model-constrained pods,
    // spreading each constrained shape's demand over the capacity of the models it allows.
    std::vector<double> capacity(cluster_.models().size(), 0.0);
    for (NodeId n = 0; n < cluster_.num_nodes(); ++n)
      if (cluster_.node(n).model >= 0)
        capacity[cluster_.node(n).model] +=
            static_cast<double>(cluster_.node(n).gpu_capacity_total);
    pressure_.assign(capacity.size(), 0.0);
    for (const auto& s : workload_.all_shapes) {
      if (s.num_gpus == 0 || s.any_model) continue;
      double allowed = 0;
      for (size_t m = 0; m < capacity.size(); ++m)
        if ((s.model_mask >> m) & 1ULL) allowed += capacity[m];
      if (allowed <= 0) continue;
      const double demand = static_cast<double>(s.count) * s.num_gpus *
                            (s.whole ? unit_ : static_cast<double>(s.share));
      for (size_t m = 0; m < capacity.size(); ++m)
        if ((s.model_mask >> m) & 1ULL) pressure_[m] += demand / allowed;
    }
  }

  NodeChoice Evaluate(NodeId n, const PodShape& pod) override {
    const NodeState& s = cluster_.node(n);
    const double before = frag_.Get(cluster_, n, workload_);
    const double rho_scale = pod.cpu_only() ? tuning_.cpu_only_rho_scale : 1.0;
    const double risk_before = Risk(s, rho_scale);
    const double model_price = ModelPrice(s, pod);
    NodeChoice best;
    bool have = false;
    ForEachAssignment(s, pod, [&](const GpuAssignment& a) {
      const NodeState after = Apply(s, pod, a);
      double packing = 0, amount = 0;
      std::array<int64_t, kMaxGpusPerNode> free = s.gpu_free;
      std::array<int32_t, kMaxGpusPerNode> clients{};
      for (int g = 0; g < s.num_gpus; ++g) clients[g] = s.gpu_clients[g];
      for (int i = 0; i < a.count; ++i) {
        const int g = a.gpu[i];
        if (i < pod.num_whole) {
          amount += static_cast<double>(s.gpu_capacity[g]);
          continue;
        }
        const int64_t d = pod.shares[i - pod.num_whole];
        const int64_t gap = clients[g] < s.max_clients ? free[g] : 0;
        packing += Prices(s.gpu_capacity[g]).Cost(d, gap);
        free[g] -= d;
        clients[g] += 1;
        amount += static_cast<double>(d);
      }
      const double cpu = Risk(after, rho_scale) - risk_before;
      const double model = amount / unit_ * model_price;
      const double loss = packing + tuning_.cpu_weight * cpu + tuning_.model_weight * model;
      const double delta = NodeFragmentation(after, workload_) - before;
      Score sc;
      sc.value = -std::round(loss * 1e6) / 1e6;  // equal situations must tie exactly
      sc.tiebreak =
          static_cast<double>(static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / unit_))));
      if (!have || Better(sc, best.score)) {
        best.score = sc;
        best.gpus = a;
        best.detail = loss;
        have = true;
      }
    });
    return best;
  }

  std::string Describe(const NodeChoice& c) const override {
    return "expected stranded GPU " + std::to_string(c.detail) + ", FGD score " +
           std::to_string(static_cast<int64_t>(c.score.tiebreak));
  }

 private:
  // Free GPU capacity (in GPUs: each GPU's free share over its capacity) that the node's free
  // CPU cannot serve at rho CPU per GPU.
  double Risk(const NodeState& s, double scale) const {
    if (rho_ <= 0) return 0;
    double free_gpus = 0;
    for (int g = 0; g < s.num_gpus; ++g)
      free_gpus += static_cast<double>(s.gpu_free[g]) / static_cast<double>(s.gpu_capacity[g]);
    const double unserved = free_gpus - static_cast<double>(s.cpu_free) / (rho_ * scale);
    return std::max(0.0, unserved);
  }
  // How much more contended the node's model is than the least contended model the pod allows.
  double ModelPrice(const NodeState& s, const PodShape& pod) const {
    if (pressure_.empty() || s.model < 0 || pod.cpu_only()) return 0;
    double lowest = pressure_[s.model];
    for (size_t m = 0; m < pressure_.size(); ++m)
      if (pod.ModelAllowed(static_cast<int>(m))) lowest = std::min(lowest, pressure_[m]);
    return pressure_[s.model] - lowest;
  }
  const SharePrices& Prices(int64_t capacity) {
    auto it = prices_.find(capacity);
    if (it != prices_.end()) return it->second;
    std::vector<int64_t> sizes;
    std::vector<double> counts;
    for (const auto& [size, count] : share_counts_) {
      sizes.push_back(size);
      counts.push_back(count);
    }
    return prices_.emplace(capacity, SharePrices::Solve(capacity, sizes, counts)).first->second;
  }

  const ClusterState& cluster_;
  const TargetWorkload& workload_;
  PolicyOptions options_;
  DefaultPolicyOptions tuning_;
  double unit_;
  std::map<int64_t, double> share_counts_;
  std::map<int64_t, SharePrices> prices_;  // by GPU capacity
  double rho_ = 0;
  std::vector<double> pressure_;
  FragmentationCache frag_;
};

}  // namespace

Result<std::unique_ptr<Policy>> MakeDefaultPolicy(const ClusterState& cluster,
                                                  const TargetWorkload& workload,
                                                  const PolicyOptions& options,
                                                  const DefaultPolicyOptions& tuning) {
  if (tuning.cpu_only_rho_scale <= 0)
    return Status::InvalidArgument("cpu_only_rho_scale must be > 0");
  return std::unique_ptr<Policy>(new DefaultPolicy(cluster, workload, options, tuning));
}

}  // namespace gpushare::placement
