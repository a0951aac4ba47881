// The reference simulator's policies (hkust-adsl/kubernetes-scheduler-simulator, as described in
// shared/reference/fgd-benchmark.md): random, dotprod, clustering, packing, bestfit and fgd. The
// integer arithmetic and truncations are the reference's, because they decide ties.
#include <algorithm>
#include <cmath>

#include "core/placement/policy.h"
#include "core/placement/policy_default.h"

namespace gpushare::placement {
namespace {

constexpr int64_t kMaxNodeScore = 100;

// The share a pod takes on a node with a given assignment (whole GPUs count their capacity).
int64_t PodGpuAmount(const NodeState& node, const PodShape& pod, const GpuAssignment& gpus) {
  int64_t total = 0;
  for (int i = 0; i < gpus.count; ++i)
    total += i < pod.num_whole ? node.gpu_capacity[gpus.gpu[i]] : pod.shares[i - pod.num_whole];
  return total;
}

struct Normalisers {
  double cpu;
  double gpu;
};

Normalisers ComputeNormalisers(const ClusterState& c, const PolicyOptions& o) {
  Normalisers n{o.max_node_cpu, o.max_node_gpu};
  double cpu = 0, gpu = 0;
  for (NodeId i = 0; i < c.num_nodes(); ++i) {
    cpu = std::max(cpu, static_cast<double>(c.node(i).cpu_capacity));
    gpu = std::max(gpu, static_cast<double>(c.node(i).gpu_capacity_total));
  }
  if (n.cpu <= 0) n.cpu = cpu > 0 ? cpu : 1;
  if (n.gpu <= 0) n.gpu = gpu > 0 ? gpu : 1;
  return n;
}

class BasePolicy : public Policy {
 public:
  BasePolicy(const ClusterState& c, const PolicyOptions& o)
      : cluster_(c), options_(o), norm_(ComputeNormalisers(c, o)) {}
  void OnNodesAdded() override { norm_ = ComputeNormalisers(cluster_, options_); }

 protected:
  const NodeState& N(NodeId n) const { return cluster_.node(n); }
  static GpuAssignment Best(const NodeState& s, const PodShape& pod) {
    GpuAssignment a;
    BestFitAssignment(s, pod, &a);
    return a;
  }
  const ClusterState& cluster_;
  PolicyOptions options_;
  Normalisers norm_;
};

// A policy that places the pod on the best-fitting GPUs of each node and scores the node by
// its own rule (ScoreFit fills in score and detail).
class BestFitGpusPolicy : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;
  NodeChoice Evaluate(NodeId n, const PodShape& pod) final {
    const NodeState& s = N(n);
    NodeChoice c;
    c.gpus = Best(s, pod);
    ScoreFit(s, pod, &c);
    return c;
  }

 protected:
  virtual void ScoreFit(const NodeState& s, const PodShape& pod, NodeChoice* c) = 0;
};

// Random-fit: a uniformly random feasible node, a uniformly random fitting GPU.
class RandomPolicy final : public BasePolicy {
 public:
  RandomPolicy(const ClusterState& c, const PolicyOptions& o, Rng* rng)
      : BasePolicy(c, o), rng_(rng) {}
  std::string_view name() const override { return "random"; }
  bool node_local() const override { return false; }
  bool picks() const override { return true; }
  int Pick(const std::vector<NodeId>& feasible) override {
    return feasible.empty() ? -1 : static_cast<int>(rng_->Uniform(feasible.size()));
  }
  NodeChoice Evaluate(NodeId n, const PodShape& pod) override {
    const NodeState& s = N(n);
    NodeChoice c;
    c.score.value = 0;
    if (!pod.single_share()) {
      c.gpus = Best(s, pod);
      return c;
    }
    int count = 0, chosen = -1;
    for (int g = 0; g < s.num_gpus; ++g) {
      if (!s.GpuTakesShare(g, pod.shares[0])) continue;
      ++count;
      if (rng_->Uniform(static_cast<uint64_t>(count)) == 0) chosen = g;
    }
    if (chosen >= 0) c.gpus.Add(chosen);
    return c;
  }

 private:
  Rng* rng_;
};

// DotProd (Tetris): the smallest dot product of the node's free [CPU, GPU] and the pod's demand,
// both normalised by the largest node.
class DotProdPolicy final : public BestFitGpusPolicy {
 public:
  using BestFitGpusPolicy::BestFitGpusPolicy;
  std::string_view name() const override { return "dotprod"; }
  void ScoreFit(const NodeState& s, const PodShape& pod, NodeChoice* c) override {
    const double gpu = static_cast<double>(PodGpuAmount(s, pod, c->gpus));
    const double dot = (static_cast<double>(s.cpu_free) / norm_.cpu) *
                           (static_cast<double>(pod.cpu_milli) / norm_.cpu) +
                       (static_cast<double>(s.gpu_free_total) / norm_.gpu) * (gpu / norm_.gpu);
    c->detail = dot;
    c->score.value = static_cast<double>(
        static_cast<int64_t>(static_cast<double>(kMaxNodeScore) * (1.0 - dot / 2.0)));
  }
};

// GpuClustering: keep pods of one GPU kind together; fuller nodes first within a band.
class ClusteringPolicy final : public BestFitGpusPolicy {
 public:
  using BestFitGpusPolicy::BestFitGpusPolicy;
  std::string_view name() const override { return "clustering"; }
  void ScoreFit(const NodeState& s, const PodShape& pod, NodeChoice* c) override {
    if (pod.kind < 0) return;  // CPU-only: 0 everywhere, the tie rule decides
    const int64_t max_gpu = static_cast<int64_t>(norm_.gpu);
    const int64_t fill = kMaxNodeScore / 4 * (max_gpu - s.gpu_free_total) / max_gpu;
    int64_t band;
    if (s.kind_pods[pod.kind] > 0) {
      band = s.kinds_present == 1 ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4;
    } else {
      band = s.kinds_present == 0 ? kMaxNodeScore / 4 : 0;
    }
    c->score.value = static_cast<double>(fill + band);
  }
};

// GpuPacking: shared GPUs first, then free GPUs of used nodes, then idle nodes (smaller first).
class PackingPolicy final : public BestFitGpusPolicy {
 public:
  using BestFitGpusPolicy::BestFitGpusPolicy;
  std::string_view name() const override { return "packing"; }
  void ScoreFit(const NodeState& s, const PodShape& pod, NodeChoice* c) override {
    c->score.value = static_cast<double>(PackingScore(s, pod));
  }

 private:
  static int64_t PackingScore(const NodeState& s, const PodShape& pod) {
    if (pod.cpu_only()) return 0;
    const int64_t free_gpus = s.fully_free_gpus;
    if (free_gpus == s.num_gpus) return std::max(kMaxNodeScore / 3 - free_gpus, free_gpus);
    // The GPUs the pod would use, least free first (stable), as the reference picks them.
    std::array<int, kMaxGpusPerNode> order{};
    for (int g = 0; g < s.num_gpus; ++g) order[g] = g;
    std::stable_sort(order.begin(), order.begin() + s.num_gpus,
                     [&](int a, int b) { return s.gpu_free[a] < s.gpu_free[b]; });
    int need_whole = pod.num_whole;
    size_t next_share = 0;
    int fully_free_used = 0;
    int64_t free_pct_sum = 0;
    for (int i = 0; i < s.num_gpus && (need_whole > 0 || next_share < pod.shares.size()); ++i) {
      const int g = order[i];
      bool use = false;
      if (need_whole > 0) {
        if (s.GpuFullyFree(g)) {
          --need_whole;
          use = true;
        }
      } else if (s.GpuTakesShare(g, pod.shares[next_share])) {
        ++next_share;
        use = true;
      }
      if (!use) continue;
      if (s.GpuFullyFree(g)) ++fully_free_used;
      free_pct_sum += s.gpu_free[g] * 100 / s.gpu_capacity[g];
    }
    if (need_whole > 0 || next_share < pod.shares.size()) return 0;
    if (fully_free_used > 0)
      return std::max(kMaxNodeScore / 2 - fully_free_used, kMaxNodeScore / 3);
    return std::max(kMaxNodeScore - free_pct_sum / 10, kMaxNodeScore / 2);
  }
};

// BestFit: the fewest leftover [CPU, GPU] (weights 0.5/0.5), min-max normalised across nodes.
class BestFitPolicy final : public BestFitGpusPolicy {
 public:
  using BestFitGpusPolicy::BestFitGpusPolicy;
  std::string_view name() const override { return "bestfit"; }
  void ScoreFit(const NodeState& s, const PodShape& pod, NodeChoice* c) override {
    const double gpu = static_cast<double>(PodGpuAmount(s, pod, c->gpus));
    const double left = (static_cast<double>(s.cpu_free - pod.cpu_milli) / norm_.cpu) * 0.5 +
                        ((static_cast<double>(s.gpu_free_total) - gpu) / norm_.gpu) * 0.5;
    c->detail = left;
    c->score.value = static_cast<double>(
        static_cast<int64_t>((1.0 - left) * static_cast<double>(kMaxNodeScore)));
  }
  bool normalizes() const override { return true; }
  void Normalize(std::vector<Score>& scores) const override {
    if (scores.empty()) return;
    int64_t hi = INT64_MIN, lo = INT64_MAX;
    for (const auto& s : scores) {
      hi = std::max(hi, static_cast<int64_t>(s.value));
      lo = std::min(lo, static_cast<int64_t>(s.value));
    }
    const int64_t range = hi - lo;
    for (auto& s : scores)
      s.value =
          range == 0
              ? 0.0
              : static_cast<double>((static_cast<int64_t>(s.value) - lo) * kMaxNodeScore / range);
  }
};

// FGD: the steepest fragmentation descent, score = int(sigmoid(-delta / unit) * 100).
class FgdPolicy final : public BasePolicy {
 public:
  FgdPolicy(const ClusterState& c, const TargetWorkload& w, const PolicyOptions& o)
      : BasePolicy(c, o), workload_(w) {}
  std::string_view name() const override { return "fgd"; }
  NodeChoice Evaluate(NodeId n, const PodShape& pod) override {
    const NodeState& s = N(n);
    const double before = frag_.Get(cluster_, n, workload_);
    const double unit = static_cast<double>(options_.gpu_unit);
    NodeChoice best;
    bool have = false;
    ForEachAssignment(s, pod, [&](const GpuAssignment& a) {
      const double delta = NodeFragmentation(Apply(s, pod, a), workload_) - before;
      const double sig = 1.0 / (1.0 + std::exp(delta / unit));
      const double score =
          static_cast<double>(static_cast<int64_t>(sig * static_cast<double>(kMaxNodeScore)));
      if (!have || score > best.score.value) {
        best.score.value = score;
        best.gpus = a;
        best.detail = delta;
        have = true;
      }
    });
    return best;
  }
  std::string Describe(const NodeChoice& c) const override {
    return "fragmentation delta " +
           std::to_string(c.detail / static_cast<double>(options_.gpu_unit)) + " GPU, score " +
           std::to_string(static_cast<int64_t>(c.score.value));
  }

 private:
  const TargetWorkload& workload_;
  FragmentationCache frag_;
};

}  // namespace

std::string Policy::Describe(const NodeChoice& choice) const {
  return std::string(name()) + " score " + std::to_string(choice.score.value);
}

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = {"random",  "dotprod", "clustering", "packing",
                                                 "bestfit", "fgd",     "default"};
  return names;
}

bool IsPolicyName(std::string_view name) {
  for (const std::string& n : PolicyNames())
    if (n == name) return true;
  return false;
}

std::string JoinedPolicyNames(std::string_view separator) {
  std::string out;
  for (const std::string& n : PolicyNames()) {
    if (!out.empty()) out += separator;
    out += n;
  }
  return out;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const ClusterState& cluster,
                                           const TargetWorkload& workload,
                                           const PolicyOptions& options, Rng* rng) {
  if (options.gpu_unit <= 0) return Status::InvalidArgument("gpu_unit must be > 0");
  if (name == "random") {
    if (rng == nullptr) return Status::InvalidArgument("policy random needs a random generator");
    return std::unique_ptr<Policy>(new RandomPolicy(cluster, options, rng));
  }
  if (name == "dotprod") return std::unique_ptr<Policy>(new DotProdPolicy(cluster, options));
  if (name == "clustering") return std::unique_ptr<Policy>(new ClusteringPolicy(cluster, options));
  if (name == "packing") return std::unique_ptr<Policy>(new PackingPolicy(cluster, options));
  if (name == "bestfit") return std::unique_ptr<Policy>(new BestFitPolicy(cluster, options));
  if (name == "fgd") return std::unique_ptr<Policy>(new FgdPolicy(cluster, workload, options));
  if (name == "default") return MakeDefaultPolicy(cluster, workload, options);
  return Status::InvalidArgument("unknown policy '" + std::string(name) +
                                 "' (known: " + JoinedPolicyNames() + ")");
}

}  // namespace gpushare::placement
