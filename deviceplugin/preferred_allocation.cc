#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace gpushare::deviceplugin {
namespace {

int64_t NumaOf(const PlannedDevice& d) {
  return d.numa_nodes.empty() ? -1 : d.numa_nodes.front();
}

// Picks `remaining` replicas one at a time by (in use on the unit, in use on its GPU).
void ChooseShared(const DeviceIndex& index, const std::vector<int>& available,
                  const std::vector<int>& chosen, const std::vector<int>& candidates, int remaining,
                  AllocationPolicy policy, uint64_t rotation, std::vector<std::string>* out) {
  const auto& devices = index.resource().devices;
  std::vector<int> used_unit(index.unit_count()), used_gpu(index.gpu_count());
  for (int u = 0; u < index.unit_count(); ++u) used_unit[u] = index.healthy_in_unit(u);
  for (int g = 0; g < index.gpu_count(); ++g) used_gpu[g] = index.healthy_in_gpu(g);
  for (int p : available) {  // free devices are not in use
    used_unit[index.unit_of(p)]--;
    used_gpu[index.gpu_of(p)]--;
  }
  for (int p : chosen) {  // already chosen ones are
    used_unit[index.unit_of(p)]++;
    used_gpu[index.gpu_of(p)]++;
  }
  std::vector<std::vector<int>> free(index.unit_count());
  for (int p : candidates) free[index.unit_of(p)].push_back(p);
  std::vector<int> order;  // units with candidates, by (gpu index, mig index)
  for (int u = 0; u < index.unit_count(); ++u) {
    if (free[u].empty()) continue;
    std::sort(free[u].begin(), free[u].end(),
              [&](int a, int b) { return devices[a].replica < devices[b].replica; });
    order.push_back(u);
  }
  if (order.empty()) return;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const PlannedDevice& x = devices[free[a][0]];
    const PlannedDevice& y = devices[free[b][0]];
    return std::tie(x.gpu_index, x.mig_index) < std::tie(y.gpu_index, y.mig_index);
  });
  std::vector<size_t> next(index.unit_count(), 0);
  const size_t start = rotation % order.size();
  for (int k = 0; k < remaining; ++k) {
    int best = -1;
    std::pair<int, int> best_key;
    for (size_t i = 0; i < order.size(); ++i) {
      int u = order[(start + i) % order.size()];
      if (next[u] >= free[u].size()) continue;
      std::pair<int, int> key{used_unit[u], used_gpu[index.gpu_of(free[u][0])]};
      bool better =
          best < 0 || (policy == AllocationPolicy::kDistributed ? key < best_key : key > best_key);
      if (better) {
        best = u;
        best_key = key;
      }
    }
    if (best < 0) return;
    int p = free[best][next[best]++];
    used_unit[best]++;
    used_gpu[index.gpu_of(p)]++;
    out->push_back(devices[p].id);
  }
}

// Whole GPUs: from one NUMA node when one has enough, else from as few nodes as possible.
void ChooseWholeNuma(const DeviceIndex& index, const std::vector<int>& chosen,
                     const std::vector<int>& candidates, int remaining,
                     std::vector<std::string>* out) {
  const auto& devices = index.resource().devices;
  std::map<int64_t, std::vector<int>> by_node;
  for (int p : candidates) by_node[NumaOf(devices[p])].push_back(p);
  for (auto& [n, v] : by_node) {
    std::sort(v.begin(), v.end(),
              [&](int a, int b) { return devices[a].gpu_index < devices[b].gpu_index; });
  }
  std::set<int64_t> chosen_nodes;
  for (int p : chosen) chosen_nodes.insert(NumaOf(devices[p]));

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
    for (int p : by_node[n]) {
      if (remaining == 0) return;
      out->push_back(devices[p].id);
      --remaining;
    }
  }
}

}  // namespace

Result<std::vector<std::string>> PreferredAllocator::Choose(const DeviceIndex& index,
                                                            const PreferredAllocationQuery& q) {
  const PlannedResource& res = index.resource();
  if (q.allocation_size < 1) {
    return Status::InvalidArgument("resource " + res.name +
                                   ": allocation_size must be at least 1, got " +
                                   std::to_string(q.allocation_size));
  }
  const int n = static_cast<int>(res.devices.size());
  std::vector<char> in_available(n, 0), in_chosen(n, 0);
  std::vector<int> available, chosen;
  available.reserve(q.available.size());
  for (const std::string& id : q.available) {
    int p = index.Position(id);
    if (p < 0 || in_available[p]) continue;
    in_available[p] = 1;
    available.push_back(p);
  }
  for (const std::string& id : q.must_include) {
    int p = index.Position(id);
    if (p < 0 || !in_available[p] || in_chosen[p]) continue;
    in_chosen[p] = 1;
    chosen.push_back(p);
  }
  if (static_cast<int>(chosen.size()) > q.allocation_size) {
    return Status::InvalidArgument(
        "resource " + res.name + ": must_include_deviceIDs has " + std::to_string(chosen.size()) +
        " devices, more than allocation_size " + std::to_string(q.allocation_size));
  }
  std::vector<std::string> out;
  for (int p : chosen) out.push_back(res.devices[p].id);
  const int remaining = q.allocation_size - static_cast<int>(chosen.size());
  if (remaining == 0) return out;

  std::vector<int> candidates;
  for (int p : available) {
    if (!in_chosen[p]) candidates.push_back(p);
  }
  bool shared = res.replicas > 1;
  for (const PlannedDevice& d : res.devices) shared = shared || d.is_mig || d.replica >= 0;
  if (shared) {
    uint64_t rotation;
    {
      MutexLock lock(&mu_);
      rotation = rotation_++;
    }
    ChooseShared(index, available, chosen, candidates, remaining, policy_, rotation, &out);
  } else {
    ChooseWholeNuma(index, chosen, candidates, remaining, &out);
  }
  return out;
}

}  // namespace gpushare::deviceplugin
