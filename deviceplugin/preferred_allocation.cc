#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace gpushare::deviceplugin {
namespace {

int64_t NumaOf(const PlannedDevice& d) { return d.numa_nodes.empty() ? -1 : d.numa_nodes.front(); }

// One replicated unit (a GPU or a MIG device) and its free replicas.
struct Unit {
  const PlannedDevice* first = nullptr;  // for ordering
  std::vector<const PlannedDevice*> free;  // candidates, lowest replica first
  size_t next = 0;
  int used = 0;                            // replicas of this unit in use (incl. chosen ones)
};

void ChooseShared(const DeviceIndex& index, const std::vector<const PlannedDevice*>& available,
                  const std::vector<const PlannedDevice*>& chosen,
                  const std::vector<const PlannedDevice*>& candidates, int remaining,
                  AllocationPolicy policy, uint64_t rotation, std::vector<std::string>* out) {
  std::map<std::string, int> healthy_unit, healthy_gpu, free_unit, free_gpu;
  for (const PlannedDevice& d : index.resource().devices) {
    if (!d.healthy) continue;
    healthy_unit[d.device_uuid]++;
    healthy_gpu[d.gpu_uuid]++;
  }
  for (const PlannedDevice* d : available) {
    free_unit[d->device_uuid]++;
    free_gpu[d->gpu_uuid]++;
  }
  std::map<std::string, int> used_gpu;
  for (auto& [g, n] : healthy_gpu) used_gpu[g] = n - free_gpu[g];
  std::map<std::string, Unit> units;
  for (auto& [u, n] : healthy_unit) units[u].used = n - free_unit[u];
  for (const PlannedDevice* d : chosen) {
    units[d->device_uuid].used++;
    used_gpu[d->gpu_uuid]++;
  }
  for (const PlannedDevice* d : candidates) {
    Unit& u = units[d->device_uuid];
    if (u.first == nullptr) u.first = d;
    u.free.push_back(d);
  }
  std::vector<Unit*> order;
  for (auto& [id, u] : units) {
    if (u.first == nullptr) continue;
    std::sort(u.free.begin(), u.free.end(),
              [](const PlannedDevice* a, const PlannedDevice* b) { return a->replica < b->replica; });
    order.push_back(&u);
  }
  if (order.empty()) return;
  std::sort(order.begin(), order.end(), [](const Unit* a, const Unit* b) {
    return std::tie(a->first->gpu_index, a->first->mig_index) <
           std::tie(b->first->gpu_index, b->first->mig_index);
  });
  const size_t start = rotation % order.size();
  for (int k = 0; k < remaining; ++k) {
    Unit* best = nullptr;
    std::pair<int, int> best_key;
    for (size_t i = 0; i < order.size(); ++i) {
      Unit* u = order[(start + i) % order.size()];
      if (u->next >= u->free.size()) continue;
      std::pair<int, int> key{u->used, used_gpu[u->first->gpu_uuid]};
      bool better = best == nullptr ||
                    (policy == AllocationPolicy::kDistributed ? key < best_key : key > best_key);
      if (better) {
        best = u;
        best_key = key;
      }
    }
    if (best == nullptr) return;
    const PlannedDevice* d = best->free[best->next++];
    best->used++;
    used_gpu[d->gpu_uuid]++;
    out->push_back(d->id);
  }
}

void ChooseWholeNuma(const std::vector<const PlannedDevice*>& chosen,
                     const std::vector<const PlannedDevice*>& candidates, int remaining,
                     std::vector<std::string>* out) {
  std::map<int64_t, std::vector<const PlannedDevice*>> by_node;
  for (const PlannedDevice* d : candidates) by_node[NumaOf(*d)].push_back(d);
  for (auto& [n, v] : by_node) {
    std::sort(v.begin(), v.end(),
              [](const PlannedDevice* a, const PlannedDevice* b) { return a->gpu_index < b->gpu_index; });
  }
  std::set<int64_t> chosen_nodes;
  for (const PlannedDevice* d : chosen) chosen_nodes.insert(NumaOf(*d));

  std::vector<int64_t> nodes;
  for (auto& [n, v] : by_node) nodes.push_back(n);
  // Preference: the node already holding must_include, then the smallest node that fits
  // entirely, then the largest nodes first (to span as few nodes as possible).
  auto fits = [&](int64_t n) { return static_cast<int>(by_node[n].size()) >= remaining; };
  std::sort(nodes.begin(), nodes.end(), [&](int64_t a, int64_t b) {
    bool ca = chosen_nodes.count(a) > 0, cb = chosen_nodes.count(b) > 0;
    if (ca != cb) return ca;
    bool fa = fits(a), fb = fits(b);
    if (fa != fb) return fa;
    size_t sa = by_node[a].size(), sb = by_node[b].size();
    if (fa && sa != sb) return sa < sb;
    if (!fa && sa != sb) return sa > sb;
    return a < b;
  });
  for (int64_t n : nodes) {
    for (const PlannedDevice* d : by_node[n]) {
      if (remaining == 0) return;
      out->push_back(d->id);
      --remaining;
    }
  }
}

}  // namespace

Result<std::vector<std::string>> PreferredAllocator::Choose(const DeviceIndex& index,
                                                             const PreferredAllocationQuery& q) {
  const PlannedResource& res = index.resource();
  if (q.allocation_size < 1) {
    return Status::InvalidArgument("resource " + res.name + ": allocation_size must be at least 1, got " +
                                   std::to_string(q.allocation_size));
  }
  std::set<std::string> available_ids;
  std::vector<const PlannedDevice*> available;
  for (const std::string& id : q.available) {
    const PlannedDevice* d = index.Find(id);
    if (d == nullptr || !available_ids.insert(id).second) continue;
    available.push_back(d);
  }
  std::set<std::string> chosen_ids;
  std::vector<const PlannedDevice*> chosen;
  for (const std::string& id : q.must_include) {
    if (!available_ids.count(id) || !chosen_ids.insert(id).second) continue;
    chosen.push_back(index.Find(id));
  }
  if (static_cast<int>(chosen.size()) > q.allocation_size) {
    return Status::InvalidArgument("resource " + res.name + ": must_include_deviceIDs has " +
                                   std::to_string(chosen.size()) + " devices, more than allocation_size " +
                                   std::to_string(q.allocation_size));
  }
  std::vector<std::string> out;
  for (const PlannedDevice* d : chosen) out.push_back(d->id);
  const int remaining = q.allocation_size - static_cast<int>(chosen.size());
  if (remaining == 0) return out;

  std::vector<const PlannedDevice*> candidates;
  for (const PlannedDevice* d : available) {
    if (!chosen_ids.count(d->id)) candidates.push_back(d);
  }
  bool shared = res.replicas > 1;
  for (const PlannedDevice& d : res.devices) shared = shared || d.is_mig || d.replica >= 0;
  if (shared) {
    uint64_t rotation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rotation = rotation_++;
    }
    ChooseShared(index, available, chosen, candidates, remaining, policy_, rotation, &out);
  } else {
    ChooseWholeNuma(chosen, candidates, remaining, &out);
  }
  return out;
}

}  // namespace gpushare::deviceplugin
