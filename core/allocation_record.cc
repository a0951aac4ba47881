#include "core/allocation_record.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/memshare.h"

namespace gpushare::alloc {
namespace {

struct Known {
  const PlannedResource* resource = nullptr;
  const PlannedDevice* device = nullptr;
};

// The record of a device the plan knows.
DeviceRecord FromPlan(const PlannedResource& r, const PlannedDevice& d, const Inventory& inv) {
  DeviceRecord out;
  out.id = d.id;
  out.gpu = d.gpu_index;
  out.uuid = d.gpu_uuid;
  out.replica = d.replica;
  if (r.is_memory_shares()) {
    out.kind = DeviceKind::kMemory;
    out.units = 1;
    out.memory_mib = r.unit_mib;
    return out;
  }
  if (r.gpu_milli) {
    out.kind = DeviceKind::kMemory;
    out.units = 1;
    out.memory_mib = static_cast<int64_t>(d.memory_limit_mib);  // a thousandth of the GPU
    return out;
  }
  if (d.is_mig) {
    out.kind = DeviceKind::kMig;
    out.mig = d.device_uuid;
    const MigInstance* mig = nullptr;
    if (inv.FindMigOwner(d.device_uuid, &mig) != nullptr && mig != nullptr)
      out.profile = mig->profile;
  } else {
    out.kind = d.replica >= 0 ? DeviceKind::kReplica : DeviceKind::kWhole;
  }
  if (d.replica < 0) {
    out.memory_mib = static_cast<int64_t>(d.memory_mib);  // the whole GPU or MIG instance
  } else {
    out.memory_mib = static_cast<int64_t>(d.memory_limit_mib);  // 0: shares the memory
  }
  return out;
}

// What an ID the plan does not know says by itself.
DeviceRecord FromId(const std::string& id, const Inventory& inv) {
  DeviceRecord out;
  out.id = id;
  std::string base = id;
  if (Result<memshare::UnitId> u = memshare::ParseUnitDeviceId(id); u.ok()) {
    base = u->gpu_uuid;
  } else if (size_t sep = id.rfind("::"); sep != std::string::npos) {
    base = id.substr(0, sep);
    const std::string n = id.substr(sep + 2);
    if (!n.empty() && n.size() < 6 &&
        std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      out.replica = std::stoi(n);
  }
  const MigInstance* mig = nullptr;
  if (const Gpu* g = inv.FindByUuid(base)) {
    out.gpu = g->index;
    out.uuid = g->uuid;
  } else if (const Gpu* owner = inv.FindMigOwner(base, &mig)) {
    out.gpu = owner->index;
    out.uuid = owner->uuid;
    out.mig = base;
  }
  return out;
}

// Merges the memory units of one GPU into one entry (the least unit ID stands for them).
std::vector<DeviceRecord> MergeUnits(std::vector<DeviceRecord> in) {
  std::vector<DeviceRecord> out;
  std::unordered_map<std::string, size_t> by_gpu;
  for (DeviceRecord& d : in) {
    if (d.kind != DeviceKind::kMemory) {
      out.push_back(std::move(d));
      continue;
    }
    auto [it, fresh] = by_gpu.emplace(d.uuid, out.size());
    if (fresh) {
      out.push_back(std::move(d));
    } else {
      DeviceRecord& merged = out[it->second];
      merged.units += d.units;
      merged.memory_mib += d.memory_mib;
      merged.id = std::min(merged.id, d.id);  // whatever order kubelet lists them in
    }
  }
  return out;
}

}  // namespace

std::string_view DeviceKindName(DeviceKind k) {
  switch (k) {
    case DeviceKind::kWhole:
      return "whole";
    case DeviceKind::kReplica:
      return "replica";
    case DeviceKind::kMig:
      return "mig";
    case DeviceKind::kMemory:
      return "memory";
    case DeviceKind::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<DeviceKind> ParseDeviceKind(std::string_view s) {
  for (DeviceKind k : {DeviceKind::kWhole, DeviceKind::kReplica, DeviceKind::kMig,
                       DeviceKind::kMemory, DeviceKind::kUnknown}) {
    if (DeviceKindName(k) == s) return k;
  }
  return std::nullopt;
}

std::map<std::string, AllocationRecord> BuildAllocationRecords(
    std::string_view node, const ResourcePlan& plan, const Inventory& inventory,
    const std::vector<AllocatedDevices>& allocated) {
  std::unordered_map<std::string, Known> known;
  for (const PlannedResource& r : plan.resources) {
    for (const PlannedDevice& d : r.devices) known[r.name + '\n' + d.id] = {&r, &d};
  }
  std::map<std::string, AllocationRecord> out;
  for (const AllocatedDevices& a : allocated) {
    if (plan.Find(a.resource) == nullptr || a.device_ids.empty()) continue;
    AllocationRecord& rec = out[a.pod_namespace + "/" + a.pod_name];
    rec.node = std::string(node);
    ContainerRecord c;
    c.name = a.container;
    c.resource = a.resource;
    for (const std::string& id : a.device_ids) {
      auto it = known.find(a.resource + '\n' + id);
      c.devices.push_back(it != known.end()
                              ? FromPlan(*it->second.resource, *it->second.device, inventory)
                              : FromId(id, inventory));
    }
    c.devices = MergeUnits(std::move(c.devices));
    // Kubelet lists a container's devices in no stable order: sort them, so the same
    // allocation always encodes to the same bytes (and is not written again).
    std::sort(c.devices.begin(), c.devices.end(), [](const auto& x, const auto& y) {
      return std::tie(x.gpu, x.replica, x.id) < std::tie(y.gpu, y.replica, y.id);
    });
    rec.containers.push_back(std::move(c));
  }
  for (auto& [key, rec] : out) {
    std::sort(rec.containers.begin(), rec.containers.end(), [](const auto& x, const auto& y) {
      return std::tie(x.name, x.resource) < std::tie(y.name, y.resource);
    });
    if (rec.containers.size() > kMaxContainers) {
      for (size_t i = kMaxContainers; i < rec.containers.size(); ++i)
        rec.truncated += static_cast<int64_t>(rec.containers[i].devices.size());
      rec.containers.resize(kMaxContainers);
    }
    std::set<int> gpus;
    size_t room = kMaxDevicesPerRecord;
    for (ContainerRecord& c : rec.containers) {
      if (c.devices.size() > room) {
        rec.truncated += static_cast<int64_t>(c.devices.size() - room);
        c.devices.resize(room);
      }
      room -= c.devices.size();
      for (const DeviceRecord& d : c.devices) {
        if (d.gpu >= 0) gpus.insert(d.gpu);
      }
    }
    for (int i : gpus) {
      const Gpu* g = inventory.FindByIndex(i);
      if (g == nullptr) continue;
      rec.gpus.push_back({g->index, g->uuid, g->product, static_cast<int64_t>(g->memory_mib)});
    }
  }
  return out;
}

std::vector<RecordPatch> DecideRecordPatches(std::string_view node,
                                             const std::map<std::string, std::string>& desired,
                                             const std::vector<PodState>& pods) {
  std::vector<RecordPatch> out;
  for (const PodState& p : pods) {
    auto it = desired.find(p.key);
    if (it == desired.end() || p.node_name != node || p.uid.empty()) continue;
    if (p.value.has_value() && *p.value == it->second) continue;
    out.push_back({p.key, p.uid, it->second, p.version});
  }
  return out;
}

void RecordWrites::Wrote(const RecordPatch& patch) {
  pending_[patch.key] = patch;
}

PodState RecordWrites::Current(PodState pod) {
  auto it = pending_.find(pod.key);
  if (it == pending_.end()) return pod;
  if (it->second.uid == pod.uid && it->second.seen == pod.version) {
    pod.value = it->second.value;
  } else {
    pending_.erase(it);
  }
  return pod;
}

void RecordWrites::Retain(const std::map<std::string, std::string>& keys) {
  std::erase_if(pending_, [&keys](const auto& kv) { return !keys.contains(kv.first); });
}

bool RecordBackoff::Allowed(const std::string& key, int64_t now_ms) const {
  auto it = state_.find(key);
  return it == state_.end() || now_ms >= it->second.next_ms;
}

void RecordBackoff::Failed(const std::string& key, int64_t now_ms) {
  Entry& e = state_[key];
  e.delay_ms = e.delay_ms == 0 ? initial_ms_ : std::min(max_ms_, e.delay_ms * 2);
  e.next_ms = now_ms + e.delay_ms;
}

void RecordBackoff::Retain(const std::map<std::string, std::string>& keys) {
  std::erase_if(state_, [&keys](const auto& kv) { return !keys.contains(kv.first); });
}

}  // namespace gpushare::alloc
