// See memshare_node.h.
#include "core/memshare_node.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <unordered_map>

namespace gpushare::memshare {
namespace {

std::string JoinGpuCounts(const std::map<int, int64_t>& per_gpu) {
  std::string out;
  for (const auto& [gpu, n] : per_gpu) {
    if (!out.empty()) out += ", ";
    out += "GPU " + std::to_string(gpu) + ": " + std::to_string(n) + (n == 1 ? " unit" : " units");
  }
  return out;
}

}  // namespace

const PlannedResource* FindMemoryResource(const ResourcePlan& plan) {
  for (const PlannedResource& r : plan.resources) {
    if (r.is_memory_shares()) return &r;
  }
  return nullptr;
}

NodeInventory BuildNodeInventory(const Inventory& inventory, const NodeConfig& config,
                                 const ResourcePlan& plan) {
  NodeInventory out;
  out.unit = config.gpushare.memory_shares.unit;
  out.max_clients_per_gpu = config.gpushare.max_clients_per_gpu;
  const PlannedResource* mem = FindMemoryResource(plan);
  for (const Gpu& g : inventory.gpus) {
    InventoryGpu e;
    e.index = g.index;
    e.uuid = g.uuid;
    e.model = g.product;
    e.memory_mib = static_cast<int64_t>(g.memory_mib);
    int64_t units = 0, healthy_units = 0;
    if (mem != nullptr) {
      for (const PlannedDevice& d : mem->devices) {
        if (d.gpu_uuid != g.uuid) continue;
        ++units;
        healthy_units += d.healthy ? 1 : 0;
      }
    }
    if (units > 0) {
      e.units = units;
      e.mode = std::string(kMemoryMode);
      e.healthy = healthy_units == units;
    } else {
      bool any = false, shared = false, mig = false, healthy = true;
      for (const PlannedResource& r : plan.resources) {
        for (const PlannedDevice& d : r.devices) {
          if (d.gpu_uuid != g.uuid) continue;
          any = true;
          shared = shared || d.replica >= 0;
          mig = mig || d.is_mig;
          healthy = healthy && d.healthy;
        }
      }
      e.units = 0;
      e.mode = std::string(mig      ? kMigMode
                           : shared ? kTimeSlicingMode
                           : any    ? kExclusiveMode
                                    : "unused");
      e.healthy = healthy;
    }
    out.gpus.push_back(std::move(e));
  }
  std::sort(out.gpus.begin(), out.gpus.end(),
            [](const InventoryGpu& a, const InventoryGpu& b) { return a.index < b.index; });
  return out;
}

GpuCount CountMemoryGpus(const NodeInventory& inventory) {
  GpuCount c;
  for (const InventoryGpu& g : inventory.gpus) {
    if (g.mode != kMemoryMode || g.units <= 0) continue;
    ++c.capacity;
    if (g.healthy) ++c.allocatable;
  }
  return c;
}

Result<UnitChoice> ChooseUnits(const PlannedResource& resource, const UnitQuery& q,
                               const SlotLedger& ledger) {
  if (q.size < 1) {
    return Status::InvalidArgument("resource " + resource.name +
                                   ": allocation_size must be at least 1, got " +
                                   std::to_string(q.size));
  }
  std::unordered_map<std::string, const PlannedDevice*> by_id;
  by_id.reserve(resource.devices.size());
  for (const PlannedDevice& d : resource.devices) by_id.emplace(d.id, &d);

  UnitChoice out;
  std::set<std::string> must;
  std::vector<int> must_gpus;
  for (const std::string& id : q.must_include) {
    auto it = by_id.find(id);
    if (it == by_id.end() || !must.insert(id).second) continue;
    out.ids.push_back(id);
    must_gpus.push_back(it->second->gpu_index);
  }
  if (static_cast<int64_t>(out.ids.size()) > q.size) {
    return Status::InvalidArgument("resource " + resource.name + ": must_include_deviceIDs has " +
                                   std::to_string(out.ids.size()) +
                                   " devices, more than allocation_size " + std::to_string(q.size));
  }
  const int64_t need = q.size - static_cast<int64_t>(out.ids.size());
  std::map<int, std::vector<const PlannedDevice*>> free;  // GPU index -> free units
  std::set<std::string> seen;
  for (const std::string& id : q.available) {
    auto it = by_id.find(id);
    if (it == by_id.end() || must.count(id) || !seen.insert(id).second) continue;
    free[it->second->gpu_index].push_back(it->second);
  }
  auto room = [&](int gpu) {
    auto it = free.find(gpu);
    return it == free.end() ? int64_t{0} : static_cast<int64_t>(it->second.size());
  };
  // The fullest GPU among those `ok` accepts (best fit: keeps the emptier GPUs for larger shares).
  auto fullest = [&](const std::function<bool(int gpu, int64_t room)>& ok) {
    int best = -1;
    for (const auto& [gpu, units] : free) {
      const int64_t n = static_cast<int64_t>(units.size());
      if (ok(gpu, n) && (best < 0 || n < room(best))) best = gpu;
    }
    return best;
  };
  auto use_slot = [&](const SlotKey& key, int gpu, const char* reason) {
    out.gpu = gpu;
    out.key = key;
    out.reason = reason;
  };
  if (!must_gpus.empty()) {
    out.gpu = must_gpus.front();
    out.reason = "must_include";
  } else {
    // A first request: an open slot of a key that asks this size first.
    for (const PendingSlot& p : ledger.pending) {
      if (p.key.fresh != q.size) continue;
      out.matched_pending = true;
      if (ledger.Open(p.key, p.gpu) > 0 && room(p.gpu) >= p.key.demand) {
        out.steered = p;
        use_slot(p.key, p.gpu, "planned");
        break;
      }
      const int g = fullest(
          [&](int gpu, int64_t n) { return n >= p.key.demand && ledger.Vacated(p.key, gpu) > 0; });
      if (g >= 0) {
        out.steered = p;
        use_slot(p.key, g, "swapped");
        break;
      }
    }
    // What the request will hold in the end: the demand of the pending slots that ask this size
    // first (one demand per first size on a node: memshare::FreshConflict), else its size.
    SlotKey want{q.size, q.size};
    for (const PendingSlot& p : ledger.pending) {
      if (p.key.fresh == q.size) want = p.key;
    }
    if (out.gpu < 0) {
      for (const auto& [kg, n] : ledger.open) {
        const auto& [key, gpu] = kg;
        if (key != want || n <= 0 || room(gpu) < key.demand) continue;
        if (out.gpu < 0 || room(gpu) < room(out.gpu)) use_slot(key, gpu, "open_slot");
      }
    }
    if (out.gpu < 0) {
      out.gpu =
          fullest([&](int gpu, int64_t n) { return n - ledger.PromisedUnits(gpu) >= want.demand; });
      out.reason = "unpromised_best_fit";
    }
    if (out.gpu < 0) {
      out.gpu = fullest([&](int, int64_t n) { return n >= want.demand; });
      out.reason = "best_fit";
    }
    if (out.gpu < 0) {
      out.gpu = fullest([&](int, int64_t n) { return n >= need; });
      out.reason = "best_fit";
    }
    if (out.gpu < 0) {
      for (const auto& [gpu, units] : free) {
        if (out.gpu < 0 || static_cast<int64_t>(units.size()) > room(out.gpu)) out.gpu = gpu;
      }
      out.reason = "no_gpu_has_room";
    }
  }
  if (need > 0 && out.gpu >= 0) {
    std::vector<const PlannedDevice*>& units = free[out.gpu];
    std::sort(units.begin(), units.end(), [](const PlannedDevice* a, const PlannedDevice* b) {
      return a->replica < b->replica;
    });
    for (int64_t k = 0; k < need && k < static_cast<int64_t>(units.size()); ++k)
      out.ids.push_back(units[k]->id);
  }
  return out;
}

Result<UnitChoice> ChooseWholeGpus(const PlannedResource& resource, const UnitQuery& q,
                                   const std::vector<int>& planned) {
  if (!AsksWholeGpus(q.size)) {
    return Status::InvalidArgument("resource " + resource.name + ": " + std::to_string(q.size) +
                                   " is not a whole number of GPUs (1000 each)");
  }
  std::map<int, int64_t> total;  // GPU index -> devices
  std::unordered_map<std::string, const PlannedDevice*> by_id;
  by_id.reserve(resource.devices.size());
  for (const PlannedDevice& d : resource.devices) {
    by_id.emplace(d.id, &d);
    total[d.gpu_index]++;
  }
  std::map<int, std::vector<const PlannedDevice*>> free;
  std::set<std::string> seen;
  for (const std::vector<std::string>* list : {&q.must_include, &q.available}) {
    for (const std::string& id : *list) {
      auto it = by_id.find(id);
      if (it != by_id.end() && seen.insert(id).second)
        free[it->second->gpu_index].push_back(it->second);
    }
  }
  auto whole_free = [&](int gpu) {
    auto it = free.find(gpu);
    return it != free.end() && static_cast<int64_t>(it->second.size()) == total[gpu];
  };
  std::vector<int> chosen;  // in the order taken
  std::set<int> taken;
  auto take = [&](int g) {
    if (taken.insert(g).second) chosen.push_back(g);
  };
  const size_t k = static_cast<size_t>(q.size / kMilliPerGpu);
  UnitChoice out;
  out.reason = "planned";
  for (int g : planned)
    if (chosen.size() < k && whole_free(g)) take(g);
  for (const auto& [g, devices] : free) {
    if (chosen.size() >= k) break;
    if (!whole_free(g) || taken.count(g)) continue;
    take(g);
    out.reason = "free_gpu";
  }
  if (chosen.size() < k) {
    // Not enough whole GPUs: the most free devices, so that Allocate names what is missing.
    out.reason = "no_gpu_has_room";
    std::vector<std::pair<int64_t, int>> by_room;
    for (const auto& [g, devices] : free)
      if (!taken.count(g)) by_room.push_back({-static_cast<int64_t>(devices.size()), g});
    std::sort(by_room.begin(), by_room.end());
    for (const auto& [n, g] : by_room) take(g);
  }
  for (int g : chosen) {
    std::vector<const PlannedDevice*>& devices = free[g];
    std::sort(devices.begin(), devices.end(), [](const PlannedDevice* a, const PlannedDevice* b) {
      return a->replica < b->replica;
    });
    for (const PlannedDevice* d : devices) {
      if (static_cast<int64_t>(out.ids.size()) >= q.size) break;
      out.ids.push_back(d->id);
    }
  }
  out.gpu = chosen.empty() ? -1 : chosen.front();
  return out;
}

Result<UnitChoice> ChooseMilli(const PlannedResource& resource, const UnitQuery& query,
                               const SlotLedger& ledger, const std::vector<int>& planned_whole) {
  if (AsksWholeGpus(query.size)) return ChooseWholeGpus(resource, query, planned_whole);
  return ChooseUnits(resource, query, ledger);
}

namespace {

Result<UnitAllocation> CheckMilli(const PlannedResource& resource,
                                  const std::vector<const PlannedDevice*>& devices,
                                  const std::map<int, int64_t>& per_gpu) {
  std::map<int, int64_t> total;
  for (const PlannedDevice& d : resource.devices) total[d.gpu_index]++;
  UnitAllocation a;
  a.milli = true;
  a.gpu = devices.front()->gpu_index;
  a.gpu_uuid = devices.front()->gpu_uuid;
  a.units = static_cast<int64_t>(devices.size());
  a.gpu_units = kMilliPerGpu;
  bool whole = true;
  for (const auto& [g, n] : per_gpu) {
    whole = whole && n == total[g];
    a.gpus.push_back(g);
  }
  if (whole) return a;  // whole GPUs: no limit
  if (per_gpu.size() > 1) {
    return Status::InvalidArgument(
        "resource " + resource.name + ": the " + std::to_string(devices.size()) +
        " milli of this container span " + std::to_string(per_gpu.size()) + " GPUs (" +
        JoinGpuCounts(per_gpu) +
        "); a fraction must come from one GPU and whole GPUs take all 1000 of each. No GPU had "
        "room, or kubelet did not follow GetPreferredAllocation's advice");
  }
  a.limit_mib = MilliOfMemoryMiB(a.units, static_cast<int64_t>(devices.front()->memory_mib));
  return a;
}

}  // namespace

Result<UnitAllocation> CheckUnits(const PlannedResource& resource,
                                  const std::vector<const PlannedDevice*>& units) {
  std::map<int, int64_t> per_gpu;
  for (const PlannedDevice* d : units) per_gpu[d->gpu_index]++;
  if (per_gpu.empty()) {
    return Status::InvalidArgument("resource " + resource.name +
                                   ": container request has no units");
  }
  if (resource.gpu_milli) return CheckMilli(resource, units, per_gpu);
  if (per_gpu.size() > 1) {
    return Status::InvalidArgument(
        "resource " + resource.name + ": the " + std::to_string(units.size()) +
        " units of this container span " + std::to_string(per_gpu.size()) + " GPUs (" +
        JoinGpuCounts(per_gpu) +
        "); a container's memory share must come from one GPU. No single GPU had " +
        std::to_string(units.size()) +
        " free units, or kubelet did not follow GetPreferredAllocation's advice");
  }
  UnitAllocation a;
  a.gpu = units.front()->gpu_index;
  a.gpu_uuid = units.front()->gpu_uuid;
  a.units = static_cast<int64_t>(units.size());
  for (const PlannedDevice& d : resource.devices) a.gpu_units += d.gpu_uuid == a.gpu_uuid ? 1 : 0;
  a.limit_mib = a.units * resource.unit_mib;
  return a;
}

std::map<std::string, std::string> AllocationEnv(const UnitAllocation& a) {
  if (a.milli) {
    std::string idx;
    for (int g : a.gpus) idx += (idx.empty() ? "" : ",") + std::to_string(g);
    return {{std::string(kIdxKey), idx.empty() ? std::to_string(a.gpu) : idx}};
  }
  return {
      {std::string(kIdxKey), std::to_string(a.gpu)},
      {std::string(kPodKey), std::to_string(a.units)},
      {std::string(kContainerEnv), std::to_string(a.units)},
      {std::string(kDevKey), std::to_string(a.gpu_units)},
  };
}

int64_t PendingCore(const SlotLedger& ledger, int64_t units) {
  for (const PendingSlot& p : ledger.pending)
    if (p.key.fresh == units) return p.key.core;
  return 0;
}

ActualPlacement ActualGpus(const PodRequest& request,
                           const std::vector<ObservedContainer>& observed,
                           const Inventory& inventory) {
  ActualPlacement out;
  for (const ObservedContainer& c : observed) {
    if (c.unit_ids.empty()) continue;
    const ContainerShare* share = nullptr;
    for (const ContainerShare& a : request.app) {
      if (a.name == c.name) share = &a;
    }
    if (share == nullptr) {
      out.problems.push_back("container \"" + c.name + "\" holds " +
                             std::to_string(c.unit_ids.size()) +
                             " units but its spec asks for none");
      continue;
    }
    std::map<int, int64_t> per_gpu;
    bool unknown = false, milli_ids = false;
    for (const std::string& id : c.unit_ids) {
      Result<UnitId> u = ParseUnitDeviceId(id);
      milli_ids = milli_ids || (u.ok() && u->milli);
      const Gpu* g = u.ok() ? inventory.FindByUuid(u->gpu_uuid) : nullptr;
      if (g == nullptr) {
        out.problems.push_back("container \"" + c.name + "\": " +
                               (u.ok()
                                    ? "device ID \"" + id + "\" names a GPU this node does not have"
                                    : u.status().message()));
        unknown = true;
        continue;
      }
      per_gpu[g->index]++;
    }
    if (unknown) continue;
    if (milli_ids && share->milli >= kMilliPerGpu) {
      // Whole GPUs: 1000 on each, the container's demands in GPU index order.
      const int64_t k = share->milli / kMilliPerGpu;
      bool whole = static_cast<int64_t>(per_gpu.size()) == k;
      for (const auto& [g, n] : per_gpu) whole = whole && n == kMilliPerGpu;
      if (!whole) {
        out.problems.push_back(
            "container \"" + c.name + "\" holds " + std::to_string(c.unit_ids.size()) + " milli (" +
            JoinGpuCounts(per_gpu) + "), its spec asks for " + std::to_string(k) + " whole GPU(s)");
        continue;
      }
      int i = 0;
      for (const auto& [g, n] : per_gpu) {
        out.gpus[i == 0 ? c.name : WholeGpuSlotName(c.name, i)] = g;
        ++i;
      }
      continue;
    }
    if (per_gpu.size() != 1) {
      out.problems.push_back("container \"" + c.name + "\": units span GPUs (" +
                             JoinGpuCounts(per_gpu) + ")");
      continue;
    }
    const int64_t want = milli_ids ? share->milli : share->units;
    if (static_cast<int64_t>(c.unit_ids.size()) != want) {
      out.problems.push_back("container \"" + c.name + "\" holds " +
                             std::to_string(c.unit_ids.size()) + (milli_ids ? " milli" : " units") +
                             ", its spec asks for " + std::to_string(want));
    }
    out.gpus[c.name] = per_gpu.begin()->first;
  }
  out.complete = !request.app.empty();
  for (const ContainerShare& a : request.app)
    out.complete = out.complete && out.gpus.count(a.name) > 0;
  if (out.complete) {
    const int first = out.gpus[request.app.front().name];
    for (const ContainerShare& i : request.init) out.gpus[i.name] = first;
  }
  return out;
}

std::map<std::string, std::string> ReconcileChanges(
    const std::map<std::string, std::string>& annotations, const PodRequest& request,
    const ContainerGpus& actual, int64_t dev_units) {
  std::map<std::string, std::string> want = ConfirmAnnotations(request, actual);
  if (dev_units >= 0) want[std::string(kDevKey)] = std::to_string(dev_units);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : want) {
    auto it = annotations.find(k);
    if (it == annotations.end() || it->second != v) out[k] = v;
  }
  return out;
}

}  // namespace gpushare::memshare
