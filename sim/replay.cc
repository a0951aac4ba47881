#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/memshare.h"
#include "core/placement/rng.h"

namespace gpushare::sim {

namespace pl = placement;

std::vector<int> SubmitOrder(const Workload& workload, uint64_t seed, double tune) {
  int64_t capacity = 0;  // the cluster's GPU capacity, as RunOne's ClusterState sums it
  for (const pl::NodeSpec& n : workload.nodes)
    for (int64_t c : n.gpu_capacity) capacity += c;
  pl::Rng rng(seed);
  std::vector<int> order = ShuffledOrder(workload.pods, rng);
  return TuneOrder(std::move(order), workload.pods, capacity, tune, rng);
}

std::string ReplayPodJson(const TracePod& pod, const ReplayPodSpec& spec) {
  using json = nlohmann::json;
  json container = {{"name", "main"},
                    {"image", spec.image},
                    {"resources",
                     {{"requests",
                       {{"cpu", std::to_string(pod.request.cpu_milli) + "m"},
                        {"memory", std::to_string(pod.request.memory_mib) + "Mi"}}}}}};
  if (pod.gpu_demand() > 0)
    container["resources"]["limits"] = {
        {std::string(memshare::kMilliResource), std::to_string(pod.gpu_demand())}};
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", spec.name}, {"namespace", spec.namespace_}}},
            {"spec",
             {{"containers", json::array({container})},
              {"terminationGracePeriodSeconds", 0},
              {"restartPolicy", "Never"}}}};
  if (!spec.labels.empty()) p["metadata"]["labels"] = spec.labels;
  if (!spec.scheduler_name.empty()) p["spec"]["schedulerName"] = spec.scheduler_name;
  std::set<std::string> models;
  for (const std::string& m : pod.request.gpu_models)
    if (!m.empty()) models.insert(m);
  if (pod.gpu_demand() > 0 && !models.empty()) {
    json term = {
        {"matchExpressions",
         json::array({{{"key", "alibabacloud.com/gpu-card-model"},
                       {"operator", "In"},
                       {"values", std::vector<std::string>(models.begin(), models.end())}}})}};
    p["spec"]["affinity"] = {{"nodeAffinity",
                              {{"requiredDuringSchedulingIgnoredDuringExecution",
                                {{"nodeSelectorTerms", json::array({term})}}}}}};
  }
  return p.dump();
}

ReplayTally::ReplayTally(const Workload& workload, const pl::TargetWorkload& typical)
    : workload_(workload), typical_(typical) {
  status_ = AddNodes(workload, &cluster_);
  if (!status_.ok()) return;
  capacity_ = cluster_.gpu_capacity_total();
  node_frag_.resize(static_cast<size_t>(cluster_.num_nodes()));
  for (pl::NodeId n = 0; n < cluster_.num_nodes(); ++n) {
    by_name_[workload.nodes[static_cast<size_t>(n)].name] = n;
    node_frag_[static_cast<size_t>(n)] = pl::NodeFragmentation(cluster_.node(n), typical);
    frag_total_ += node_frag_[static_cast<size_t>(n)];
  }
}

Status ReplayTally::Record(int pod_index, const Observed& where) {
  const TracePod& pod = workload_.pods.at(static_cast<size_t>(pod_index));
  Status out = Status::Ok();
  const auto sample = [&]() {
    Sample s;
    s.arrived = arrived_;
    s.used = capacity_ - cluster_.gpu_free_total();
    s.frag = frag_total_;
    samples_.push_back(s);
  };
  if (where.node.empty()) {
    ++refused_;
    arrived_ += pod.gpu_demand();
    failed_demand_ += pod.gpu_demand();
    sample();
    return out;
  }
  ++placed_;
  const auto node = by_name_.find(where.node);
  Result<pl::PodShape> shape = pl::CompileShape(pod.request, cluster_);
  if (node == by_name_.end()) {
    out = Status::FailedPrecondition("pod " + pod.name + " ran on node " + where.node +
                                     ", which is not in the node list");
  } else if (!shape.ok()) {
    out = shape.status().WithContext("pod " + pod.name);
  } else if (where.gpus.size() != static_cast<size_t>(shape->num_gpus())) {
    out = Status::FailedPrecondition("pod " + pod.name + " on node " + where.node + " holds " +
                                     std::to_string(where.gpus.size()) +
                                     " GPU(s) by its annotations, it asked " +
                                     std::to_string(shape->num_gpus()));
  } else {
    // The shape lists whole GPUs first, then shares; a trace pod is one or the other.
    pl::GpuAssignment a;
    std::vector<int> gpus = where.gpus;
    std::sort(gpus.begin(), gpus.end());
    for (int g : gpus) a.Add(g);
    const int64_t free_before = cluster_.gpu_free_total();
    Result<pl::PlacementId> booked = cluster_.Commit(shape->resources(), node->second, a);
    if (!booked.ok()) {
      ++overcommits_;
      out = booked.status().WithContext("pod " + pod.name + " on node " + where.node +
                                        " does not fit what the cluster already holds");
    } else {
      arrived_ += free_before - cluster_.gpu_free_total();
      const size_t n = static_cast<size_t>(node->second);
      frag_total_ -= node_frag_[n];
      node_frag_[n] = pl::NodeFragmentation(cluster_.node(node->second), typical_);
      frag_total_ += node_frag_[n];
      sample();
      return out;
    }
  }
  arrived_ += pod.gpu_demand();
  sample();
  return out;
}

RunResult ReplayTally::Finish(const std::string& policy, uint64_t seed, double seconds) const {
  RunResult r;
  r.policy = policy;
  r.seed = seed;
  r.status = status_;
  r.capacity = capacity_;
  r.pods_submitted = placed_ + refused_;
  r.pods_failed = refused_;
  r.failed_gpu_demand = failed_demand_;
  r.seconds = seconds;
  int max_pct = 0;
  if (!samples_.empty())
    max_pct = static_cast<int>(std::nearbyint(100.0 * static_cast<double>(samples_.back().arrived) /
                                              static_cast<double>(capacity_ > 0 ? capacity_ : 1)));
  r.curve = BinSamples(samples_, capacity_, max_pct);
  return r;
}

}  // namespace gpushare::sim
