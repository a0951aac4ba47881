#include "core/placement/cluster.h"

#include <algorithm>

namespace gpushare::placement {

Result<NodeId> ClusterState::AddNode(const NodeSpec& spec) {
  const std::string where = "node '" + spec.name + "'";
  if (spec.name.empty()) return Status::InvalidArgument("node name must not be empty");
  if (by_name_.count(spec.name)) return Status::AlreadyExists(where + ": duplicate node name");
  if (spec.cpu_milli < 0) return Status::InvalidArgument(where + ": cpu_milli must be >= 0");
  if (spec.memory_mib < 0) return Status::InvalidArgument(where + ": memory_mib must be >= 0");
  if (spec.gpu_capacity.size() > static_cast<size_t>(kMaxGpusPerNode))
    return Status::InvalidArgument(where + ": " + std::to_string(spec.gpu_capacity.size()) +
                                   " GPUs, at most " + std::to_string(kMaxGpusPerNode) +
                                   " supported");
  if (!spec.gpu_capacity.empty() && spec.gpu_model.empty())
    return Status::InvalidArgument(where + ": has GPUs but no GPU model");
  if (spec.max_clients_per_gpu < 1)
    return Status::InvalidArgument(where + ": max_clients_per_gpu must be >= 1");
  if (spec.max_pods < 0) return Status::InvalidArgument(where + ": max_pods must be >= 0");
  for (size_t g = 0; g < spec.gpu_capacity.size(); ++g)
    if (spec.gpu_capacity[g] <= 0)
      return Status::InvalidArgument(where + ": GPU " + std::to_string(g) +
                                     " capacity must be > 0");

  NodeState s;
  s.cpu_capacity = s.cpu_free = spec.cpu_milli;
  s.mem_capacity = s.mem_free = spec.memory_mib;
  s.max_pods = spec.max_pods;
  s.max_clients = spec.max_clients_per_gpu;
  s.num_gpus = static_cast<uint8_t>(spec.gpu_capacity.size());
  if (!spec.gpu_capacity.empty()) {
    int id = ModelId(spec.gpu_model);
    if (id < 0) {
      if (models_.size() >= static_cast<size_t>(kMaxGpuModels))
        return Status::ResourceExhausted(where + ": more than " + std::to_string(kMaxGpuModels) +
                                         " GPU models in one cluster");
      models_.push_back(spec.gpu_model);
      id = static_cast<int>(models_.size()) - 1;
    }
    s.model = static_cast<int16_t>(id);
  }
  for (int g = 0; g < s.num_gpus; ++g) s.gpu_capacity[g] = s.gpu_free[g] = spec.gpu_capacity[g];
  Refresh(s);
  const NodeId id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(s);
  names_.push_back(spec.name);
  tie_rank_.push_back(id);
  by_name_.emplace(spec.name, id);
  gpu_capacity_total_ += s.gpu_capacity_total;
  gpu_free_total_ += s.gpu_free_total;
  cpu_capacity_total_ += s.cpu_capacity;
  cpu_free_total_ += s.cpu_free;
  total_gpus_ += s.num_gpus;
  return id;
}

NodeId ClusterState::FindNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : it->second;
}

int ClusterState::ModelId(std::string_view model) const {
  for (size_t i = 0; i < models_.size(); ++i)
    if (models_[i] == model) return static_cast<int>(i);
  return -1;
}

void ClusterState::Refresh(NodeState& s) {
  RefreshTotals(s);
}

void RefreshTotals(NodeState& s) {
  s.gpu_capacity_total = s.gpu_free_total = 0;
  s.fully_free_gpus = 0;
  s.max_share_free = 0;
  for (int g = 0; g < s.num_gpus; ++g) {
    s.gpu_capacity_total += s.gpu_capacity[g];
    s.gpu_free_total += s.gpu_free[g];
    if (s.GpuFullyFree(g)) ++s.fully_free_gpus;
    if (s.gpu_clients[g] < s.max_clients)
      s.max_share_free = std::max(s.max_share_free, s.gpu_free[g]);
  }
}

Result<PlacementId> ClusterState::Commit(const PodResources& pod, NodeId n,
                                         const GpuAssignment& gpus) {
  if (n < 0 || n >= num_nodes())
    return Status::NotFound("node id " + std::to_string(n) + " out of range");
  NodeState& s = nodes_[n];
  const std::string where = "node '" + names_[n] + "'";
  if (pod.cpu_milli < 0 || pod.memory_mib < 0)
    return Status::InvalidArgument("negative pod request");
  const size_t demands = static_cast<size_t>(pod.num_whole) + pod.shares.size();
  if (pod.num_whole < 0 || demands != gpus.count)
    return Status::InvalidArgument(where + ": assignment has " + std::to_string(gpus.count) +
                                   " GPUs for " + std::to_string(demands) + " GPU demands");
  if (pod.cpu_milli > s.cpu_free)
    return Status::ResourceExhausted(where + ": CPU " + std::to_string(pod.cpu_milli) +
                                     "m requested, " + std::to_string(s.cpu_free) + "m free");
  if (pod.memory_mib > s.mem_free)
    return Status::ResourceExhausted(where + ": memory " + std::to_string(pod.memory_mib) +
                                     " MiB requested, " + std::to_string(s.mem_free) + " MiB free");
  if (s.max_pods > 0 && s.pods >= s.max_pods)
    return Status::ResourceExhausted(where + ": pod limit " + std::to_string(s.max_pods) +
                                     " reached");
  // Validate the GPUs against a scratch copy, so that a pod using one GPU twice (allowed for
  // sharing demands of several containers) is checked cumulatively.
  std::array<int64_t, kMaxGpusPerNode> free = s.gpu_free;
  std::array<int16_t, kMaxGpusPerNode> clients = s.gpu_clients;
  std::array<bool, kMaxGpusPerNode> whole_taken{};
  Booking b;
  b.node = n;
  b.cpu = pod.cpu_milli;
  b.mem = pod.memory_mib;
  b.kind = pod.kind;
  b.count = gpus.count;
  for (int i = 0; i < gpus.count; ++i) {
    const int g = gpus.gpu[i];
    if (g >= s.num_gpus)
      return Status::InvalidArgument(where + ": GPU index " + std::to_string(g) + " out of range");
    if (whole_taken[g])
      return Status::InvalidArgument(where + ": GPU " + std::to_string(g) + " used twice");
    if (i < pod.num_whole) {
      if (clients[g] != 0 || free[g] != s.gpu_capacity[g])
        return Status::ResourceExhausted(where + ": GPU " + std::to_string(g) +
                                         " is not entirely free");
      b.amount[i] = s.gpu_capacity[g];
      whole_taken[g] = true;
    } else {
      const int64_t share = pod.shares[i - pod.num_whole];
      if (share <= 0) return Status::InvalidArgument("GPU share must be > 0");
      if (free[g] < share)
        return Status::ResourceExhausted(where + ": GPU " + std::to_string(g) + " has " +
                                         std::to_string(free[g]) + " free, " +
                                         std::to_string(share) + " requested");
      if (clients[g] >= s.max_clients)
        return Status::ResourceExhausted(where + ": GPU " + std::to_string(g) + " already has " +
                                         std::to_string(clients[g]) + " clients (limit " +
                                         std::to_string(s.max_clients) + ")");
      b.amount[i] = share;
    }
    free[g] -= b.amount[i];
    clients[g] += 1;
    b.gpu[i] = static_cast<uint8_t>(g);
  }
  // Apply.
  const int64_t old_free = s.gpu_free_total;
  s.cpu_free -= pod.cpu_milli;
  s.mem_free -= pod.memory_mib;
  s.pods += 1;
  s.gpu_free = free;
  s.gpu_clients = clients;
  if (pod.kind >= 0 && pod.kind < kNumPodKinds) {
    if (s.kind_pods[pod.kind]++ == 0) ++s.kinds_present;
  }
  Refresh(s);
  ++s.version;
  gpu_free_total_ += s.gpu_free_total - old_free;
  cpu_free_total_ -= pod.cpu_milli;
  size_t index;
  if (!free_bookings_.empty()) {
    index = static_cast<size_t>(free_bookings_.back());
    free_bookings_.pop_back();
    b.generation = bookings_[index].generation + 1;
    bookings_[index] = b;
  } else {
    index = bookings_.size();
    bookings_.push_back(b);
  }
  ++live_;
  // The handle carries the slot's generation, so a stale handle never releases a newer pod.
  return static_cast<PlacementId>((static_cast<uint64_t>(b.generation) << 32) | index);
}

const ClusterState::Booking* ClusterState::FindBooking(PlacementId id) const {
  if (id < 0) return nullptr;
  const uint64_t index = static_cast<uint64_t>(id) & 0xffffffffu;
  const uint32_t generation = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  if (index >= bookings_.size()) return nullptr;
  const Booking& b = bookings_[index];
  if (b.node < 0 || b.generation != generation) return nullptr;
  return &b;
}

Status ClusterState::Release(PlacementId id) {
  const Booking* found = FindBooking(id);
  if (found == nullptr) return Status::NotFound("placement " + std::to_string(id) + " is not live");
  Booking& b = const_cast<Booking&>(*found);
  NodeState& s = nodes_[b.node];
  const int64_t old_free = s.gpu_free_total;
  s.cpu_free += b.cpu;
  s.mem_free += b.mem;
  s.pods -= 1;
  for (int i = 0; i < b.count; ++i) {
    s.gpu_free[b.gpu[i]] += b.amount[i];
    s.gpu_clients[b.gpu[i]] -= 1;
  }
  if (b.kind >= 0 && b.kind < kNumPodKinds) {
    if (--s.kind_pods[b.kind] == 0) --s.kinds_present;
  }
  Refresh(s);
  ++s.version;
  gpu_free_total_ += s.gpu_free_total - old_free;
  cpu_free_total_ += b.cpu;
  b.node = -1;
  free_bookings_.push_back(static_cast<PlacementId>(&b - bookings_.data()));
  --live_;
  return Status::Ok();
}

NodeId ClusterState::PlacementNode(PlacementId id) const {
  const Booking* b = FindBooking(id);
  return b == nullptr ? -1 : b->node;
}

}  // namespace gpushare::placement
