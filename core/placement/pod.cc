#include "core/placement/pod.h"

#include <algorithm>
#include <functional>

namespace gpushare::placement {

PodRequest MakePodRequest(int64_t cpu_milli, int64_t memory_mib, int num_gpus,
                          int64_t share_per_gpu, std::string_view models, int64_t whole_unit) {
  PodRequest r;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  for (int i = 0; i < num_gpus; ++i) {
    GpuDemand d;
    d.whole = share_per_gpu >= whole_unit;
    d.share = d.whole ? 0 : share_per_gpu;
    r.gpus.push_back(d);
  }
  size_t start = 0;
  while (start <= models.size()) {
    size_t end = models.find('|', start);
    if (end == std::string_view::npos) end = models.size();
    if (end > start) r.gpu_models.emplace_back(models.substr(start, end - start));
    start = end + 1;
  }
  return r;
}

std::string PodShape::ToString() const {
  std::string s =
      "cpu=" + std::to_string(cpu_milli) + "m mem=" + std::to_string(memory_mib) + "MiB";
  if (num_whole > 0) s += " whole_gpus=" + std::to_string(num_whole);
  if (!shares.empty()) {
    s += " shares=";
    for (size_t i = 0; i < shares.size(); ++i) s += (i ? "," : "") + std::to_string(shares[i]);
  }
  if (!any_model && !model_names.empty()) {
    s += " models=";
    for (size_t i = 0; i < model_names.size(); ++i) s += (i ? "|" : "") + model_names[i];
  }
  return s;
}

void ResolveModels(PodShape& shape, const ClusterState& cluster) {
  shape.any_model = shape.model_names.empty() || shape.cpu_only();
  shape.model_mask = shape.any_model ? ~0ULL : 0ULL;
  if (shape.any_model) return;
  for (const auto& m : shape.model_names) {
    const int id = cluster.ModelId(m);
    if (id >= 0) shape.model_mask |= 1ULL << id;
  }
}

Result<PodShape> CompileShape(const PodRequest& request, const ClusterState& cluster) {
  if (request.cpu_milli < 0) return Status::InvalidArgument("cpu_milli must be >= 0");
  if (request.memory_mib < 0) return Status::InvalidArgument("memory_mib must be >= 0");
  if (request.gpus.size() > static_cast<size_t>(kMaxGpusPerNode))
    return Status::InvalidArgument("a pod may use at most " + std::to_string(kMaxGpusPerNode) +
                                   " GPUs, got " + std::to_string(request.gpus.size()));
  PodShape s;
  s.cpu_milli = request.cpu_milli;
  s.memory_mib = request.memory_mib;
  s.distinct_gpus = request.distinct_gpus;
  for (size_t i = 0; i < request.gpus.size(); ++i) {
    const GpuDemand& d = request.gpus[i];
    if (d.whole) {
      ++s.num_whole;
    } else {
      if (d.share <= 0)
        return Status::InvalidArgument("gpus[" + std::to_string(i) +
                                       "].share must be > 0 (or whole)");
      s.shares.push_back(d.share);
    }
  }
  std::sort(s.shares.begin(), s.shares.end(), std::greater<>());
  for (const auto& m : request.gpu_models)
    if (!m.empty()) s.model_names.push_back(m);
  if (s.num_whole > 0) {
    s.kind = s.num_whole;
  } else if (!s.shares.empty()) {
    s.kind = kShareKind;
  }
  ResolveModels(s, cluster);
  return s;
}

std::string_view RejectionName(Rejection r) {
  switch (r) {
    case Rejection::kNone:
      return "fits";
    case Rejection::kGpuModel:
      return "gpu_model";
    case Rejection::kNoGpus:
      return "no_gpus";
    case Rejection::kCpu:
      return "cpu";
    case Rejection::kMemory:
      return "memory";
    case Rejection::kPodLimit:
      return "pod_limit";
    case Rejection::kWholeGpus:
      return "whole_gpus";
    case Rejection::kGpuShare:
      return "gpu_share";
    case Rejection::kClientLimit:
      return "client_limit";
    case Rejection::kUnknownNode:
      return "unknown_node";
  }
  return "unknown";
}

namespace {

// Greedy GPU choice shared by the filter and BestFitAssignment.
bool Assign(const NodeState& node, const PodShape& pod, GpuAssignment* out, bool* client_limited) {
  GpuAssignment a;
  std::array<bool, kMaxGpusPerNode> taken{};
  std::array<bool, kMaxGpusPerNode> used_by_pod{};
  std::array<int64_t, kMaxGpusPerNode> free = node.gpu_free;
  std::array<int32_t, kMaxGpusPerNode> clients{};
  for (int g = 0; g < node.num_gpus; ++g) clients[g] = node.gpu_clients[g];
  int need = pod.num_whole;
  for (int g = 0; g < node.num_gpus && need > 0; ++g) {
    if (node.GpuFullyFree(g)) {
      a.Add(g);
      taken[g] = true;
      --need;
    }
  }
  if (need > 0) return false;
  for (int64_t d : pod.shares) {
    int best = -1;
    for (int g = 0; g < node.num_gpus; ++g) {
      if (taken[g] || (pod.distinct_gpus && used_by_pod[g]) || free[g] < d) continue;
      if (clients[g] >= node.max_clients) {
        if (client_limited) *client_limited = true;
        continue;
      }
      if (best < 0 || free[g] < free[best]) best = g;
    }
    if (best < 0) return false;
    a.Add(best);
    free[best] -= d;
    clients[best] += 1;
    used_by_pod[best] = true;
  }
  if (out) *out = a;
  return true;
}

}  // namespace

Rejection CheckFit(const NodeState& node, const PodShape& pod) {
  if (!pod.cpu_only()) {
    if (node.num_gpus == 0) return Rejection::kNoGpus;
    if (!pod.ModelAllowed(node.model)) return Rejection::kGpuModel;
  }
  if (pod.cpu_milli > node.cpu_free) return Rejection::kCpu;
  if (pod.memory_mib > node.mem_free) return Rejection::kMemory;
  if (node.max_pods > 0 && node.pods >= node.max_pods) return Rejection::kPodLimit;
  if (pod.cpu_only()) return Rejection::kNone;
  if (pod.num_whole > node.fully_free_gpus) return Rejection::kWholeGpus;
  if (pod.single_share()) {
    if (node.max_share_free >= pod.shares[0]) return Rejection::kNone;
    for (int g = 0; g < node.num_gpus; ++g)
      if (node.gpu_free[g] >= pod.shares[0]) return Rejection::kClientLimit;
    return Rejection::kGpuShare;
  }
  if (pod.shares.empty()) return Rejection::kNone;
  bool client_limited = false;
  if (Assign(node, pod, nullptr, &client_limited)) return Rejection::kNone;
  return client_limited ? Rejection::kClientLimit : Rejection::kGpuShare;
}

std::string ExplainRejection(const NodeState& node, const PodShape& pod,
                             const ClusterState& cluster) {
  const Rejection r = CheckFit(node, pod);
  auto n = [](int64_t v) { return std::to_string(v); };
  switch (r) {
    case Rejection::kNone:
      return "fits";
    case Rejection::kGpuModel: {
      std::string allowed;
      for (size_t i = 0; i < pod.model_names.size(); ++i)
        allowed += (i ? "|" : "") + pod.model_names[i];
      const std::string model = node.model >= 0 ? cluster.models()[node.model] : "none";
      return "GPU model " + model + " not in allowed models " + allowed;
    }
    case Rejection::kNoGpus:
      return "node has no GPUs, pod needs " + n(pod.num_gpus());
    case Rejection::kCpu:
      return "insufficient CPU: " + n(node.cpu_free) + "m free, " + n(pod.cpu_milli) +
             "m requested";
    case Rejection::kMemory:
      return "insufficient memory: " + n(node.mem_free) + " MiB free, " + n(pod.memory_mib) +
             " MiB requested";
    case Rejection::kPodLimit:
      return "pod limit reached: " + n(node.pods) + " of " + n(node.max_pods) + " pods";
    case Rejection::kWholeGpus:
      return "needs " + n(pod.num_whole) + " entirely free GPUs, node has " +
             n(node.fully_free_gpus);
    case Rejection::kGpuShare: {
      int64_t largest = 0;
      for (int g = 0; g < node.num_gpus; ++g) largest = std::max(largest, node.gpu_free[g]);
      return "no GPU with " + n(pod.shares.empty() ? 0 : pod.shares[0]) +
             " free (largest free share: " + n(largest) + ")";
    }
    case Rejection::kClientLimit:
      return "GPUs with room already have " + n(node.max_clients) + " sharing clients (the limit)";
    case Rejection::kUnknownNode:
      return "unknown node";
  }
  return "unknown";
}

bool BestFitAssignment(const NodeState& node, const PodShape& pod, GpuAssignment* out) {
  return Assign(node, pod, out, nullptr);
}

NodeState Apply(const NodeState& node, const PodShape& pod, const GpuAssignment& gpus) {
  NodeState s = node;
  s.cpu_free -= pod.cpu_milli;
  s.mem_free -= pod.memory_mib;
  s.pods += 1;
  for (int i = 0; i < gpus.count; ++i) {
    const int g = gpus.gpu[i];
    const int64_t amount = i < pod.num_whole ? s.gpu_capacity[g] : pod.shares[i - pod.num_whole];
    if (s.GpuFullyFree(g)) --s.fully_free_gpus;
    s.gpu_free[g] -= amount;
    s.gpu_clients[g] += 1;
    s.gpu_free_total -= amount;
  }
  if (pod.kind >= 0) {
    if (s.kind_pods[pod.kind]++ == 0) ++s.kinds_present;
  }
  s.max_share_free = 0;
  for (int g = 0; g < s.num_gpus; ++g)
    if (s.gpu_clients[g] < s.max_clients)
      s.max_share_free = std::max(s.max_share_free, s.gpu_free[g]);
  return s;
}

}  // namespace gpushare::placement
