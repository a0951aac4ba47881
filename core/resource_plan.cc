#include "core/resource_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/memshare.h"
#include "core/problem_list.h"
#include "core/resource_name.h"

namespace gpushare {

namespace {

constexpr std::string_view kGpuResource = "nvidia.com/gpu";
constexpr std::string_view kMigPrefix = "nvidia.com/mig-";
constexpr std::string_view kMemoryField = "gpushare.memoryShares";
// BaseDevice::entry of a whole GPU that serves memory shares.
constexpr int kMemoryEntry = -2;

// A device before sharing is applied: a whole GPU or one MIG device, with the resource it is
// advertised under when no sharing entry selects it.
struct BaseDevice {
  std::string resource;
  const Gpu* gpu = nullptr;
  const MigInstance* mig = nullptr;  // null for a whole GPU
  int entry = -1;                    // the time-slicing entry that selected it, -1 = none

  std::string Describe() const {
    if (mig == nullptr) return "GPU " + std::to_string(gpu->index) + " (" + gpu->uuid + ")";
    return "MIG device " + std::to_string(gpu->index) + ":" + std::to_string(mig->index) + " (" +
           mig->uuid + ")";
  }
  const std::string& Uuid() const { return mig != nullptr ? mig->uuid : gpu->uuid; }
};

std::string MigResourceName(const std::string& profile) {
  std::string name(kMigPrefix);
  for (char c : profile) name += (c == '+') ? '.' : c;
  return name;
}

bool IsFullGpuInstanceProfile(const std::string& profile) {
  auto slices = ParseMigProfile(profile);
  return slices.has_value() && slices->compute_slices == slices->gpu_slices;
}

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(v[i]);
  }
  return s;
}

// Lists the devices each MIG strategy advertises before sharing is applied.
void CollectBaseDevices(const Inventory& inv, MigStrategy strategy, std::vector<BaseDevice>* out,
                        ProblemList* problems, std::vector<std::string>* notes) {
  if (strategy == MigStrategy::kSingle) {
    std::vector<int> mig_gpus, plain_gpus;
    for (const auto& g : inv.gpus) (g.mig_enabled ? mig_gpus : plain_gpus).push_back(g.index);
    if (!mig_gpus.empty() && !plain_gpus.empty()) {
      problems->push_back(
          "flags.migStrategy: single requires MIG to be enabled on every GPU or on none; MIG is "
          "enabled on GPU " +
          JoinInts(mig_gpus) + " and disabled on GPU " + JoinInts(plain_gpus) +
          " (use migStrategy mixed for such a node)");
      return;
    }
    if (!mig_gpus.empty()) {
      const MigInstance* first = nullptr;
      const Gpu* first_gpu = nullptr;
      for (const auto& g : inv.gpus) {
        if (g.mig.empty()) {
          problems->push_back("flags.migStrategy: single: GPU " + std::to_string(g.index) + " (" +
                              g.uuid + ") has MIG enabled but no MIG devices");
          continue;
        }
        for (const auto& m : g.mig) {
          if (first == nullptr) {
            first = &m;
            first_gpu = &g;
          } else if (m.profile != first->profile || m.memory_mib != first->memory_mib) {
            problems->push_back(
                "flags.migStrategy: single requires all MIG devices to be identical; found " +
                first->profile + " (" + std::to_string(first->memory_mib) + " MiB) on GPU " +
                std::to_string(first_gpu->index) + " and " + m.profile + " (" +
                std::to_string(m.memory_mib) + " MiB) on GPU " + std::to_string(g.index) +
                " (use migStrategy mixed for such a node)");
            return;
          }
          out->push_back({std::string(kGpuResource), &g, &m});
        }
      }
      return;
    }
    // No MIG anywhere: single behaves like none.
  }
  for (const auto& g : inv.gpus) {
    if (!g.mig_enabled || strategy == MigStrategy::kNone || strategy == MigStrategy::kSingle) {
      if (g.mig_enabled) {
        notes->push_back("GPU " + std::to_string(g.index) +
                         " has MIG enabled; migStrategy none advertises it as a whole GPU");
      }
      out->push_back({std::string(kGpuResource), &g, nullptr});
      continue;
    }
    if (g.mig.empty()) {
      notes->push_back("GPU " + std::to_string(g.index) +
                       " has MIG enabled but no MIG devices; nothing is advertised for it");
    }
    for (const auto& m : g.mig) {
      if (!IsFullGpuInstanceProfile(m.profile)) {
        notes->push_back("MIG device " + std::to_string(g.index) + ":" + std::to_string(m.index) +
                         " (" + m.profile +
                         ") is a compute-instance sub-profile and is not advertised");
        continue;
      }
      out->push_back({MigResourceName(m.profile), &g, &m});
    }
  }
}

bool IsUnsignedNumber(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The lookup key of a `devices` list item, or "" for an item that names no device. GPU indices
// and GPU UUIDs also select the MIG devices of that GPU (a gpushare extension: it lets one entry
// share "the MIG GPU"). The first character keeps the kinds apart.
std::string SelectorKey(const std::string& item) {
  if (IsUnsignedNumber(item)) return "#" + std::to_string(std::stoi(item));
  const size_t colon = item.find(':');
  if (colon != std::string::npos && IsUnsignedNumber(item.substr(0, colon)) &&
      IsUnsignedNumber(item.substr(colon + 1))) {
    return "@" + std::to_string(std::stoi(item.substr(0, colon))) + ":" +
           std::to_string(std::stoi(item.substr(colon + 1)));
  }
  if (item.rfind("GPU-", 0) == 0) return "g" + item;
  if (item.rfind("MIG-GPU-", 0) == 0) {
    // MIG-GPU-<uuid>/<gi>/<ci>
    const std::string rest = item.substr(4);
    const size_t s1 = rest.find('/');
    const size_t s2 = s1 == std::string::npos ? s1 : rest.find('/', s1 + 1);
    if (s2 == std::string::npos) return "";
    const std::string gi = rest.substr(s1 + 1, s2 - s1 - 1), ci = rest.substr(s2 + 1);
    if (!IsUnsignedNumber(gi) || !IsUnsignedNumber(ci)) return "";
    return "c" + rest.substr(0, s1) + "/" + std::to_string(std::stoi(gi)) + "/" +
           std::to_string(std::stoi(ci));
  }
  if (item.rfind("MIG-", 0) == 0) return "m" + item;
  return "";
}

// Which base devices each `devices` item names, by lookup: an item is never compared with the
// devices one by one, so long lists on large nodes stay linear.
class SelectorIndex {
 public:
  explicit SelectorIndex(std::vector<BaseDevice>& devices) {
    for (BaseDevice& d : devices) {
      by_key_["#" + std::to_string(d.gpu->index)].push_back(&d);
      by_key_["g" + d.gpu->uuid].push_back(&d);
      if (d.mig == nullptr) continue;
      by_key_["@" + std::to_string(d.gpu->index) + ":" + std::to_string(d.mig->index)].push_back(
          &d);
      by_key_["c" + d.gpu->uuid + "/" + std::to_string(d.mig->gpu_instance_id) + "/" +
              std::to_string(d.mig->compute_instance_id)]
          .push_back(&d);
      by_key_["m" + d.mig->uuid].push_back(&d);
    }
  }
  // The devices `item` names, in device order.
  const std::vector<BaseDevice*>& Find(const std::string& item) const {
    static const std::vector<BaseDevice*> kNone;
    auto it = by_key_.find(SelectorKey(item));
    return it == by_key_.end() ? kNone : it->second;
  }

 private:
  std::unordered_map<std::string, std::vector<BaseDevice*>> by_key_;
};

std::string AdvertisedName(const ReplicatedResource& r, const TimeSlicing& ts) {
  if (!r.rename.empty()) return r.rename;
  if (ts.rename_by_default) return r.name + ".shared";
  return r.name;
}

std::string EntryPath(const ReplicatedResource& r, size_t i) {
  return r.field_path.empty() ? "sharing.timeSlicing.resources[" + std::to_string(i) + "]"
                              : r.field_path;
}

// The field that decides an entry's advertised name, for messages.
std::string NameField(const ReplicatedResource& r, size_t i, const TimeSlicing& ts) {
  if (!r.rename.empty()) return EntryPath(r, i) + ".rename";
  if (ts.rename_by_default) return "sharing.timeSlicing.renameByDefault";
  return EntryPath(r, i) + ".name";
}

// The devices a `devices` list selects for entry `i` (each once); records items that match no
// device of the entry's resource. `chosen_by` holds the entry that last chose each device.
std::vector<BaseDevice*> ChooseListed(const ReplicatedResource& r, size_t i,
                                      const SelectorIndex& index, BaseDevice* first,
                                      std::vector<size_t>* chosen_by, ProblemList* problems) {
  const std::string path = EntryPath(r, i);
  std::vector<BaseDevice*> chosen;
  for (size_t j = 0; j < r.devices.items.size(); ++j) {
    const std::string& item = r.devices.items[j];
    const std::vector<BaseDevice*>& named = index.Find(item);
    bool matched = false;
    for (BaseDevice* d : named) {
      if (d->resource != r.name) continue;
      matched = true;
      size_t& by = (*chosen_by)[static_cast<size_t>(d - first)];
      if (by != i) {
        by = i;
        chosen.push_back(d);
      }
    }
    if (matched) continue;
    std::string msg = path + ".devices[" + std::to_string(j) + "]: \"" + item + "\" matches no " +
                      r.name + " device on this node";
    if (!named.empty()) {
      msg +=
          " (" + named.front()->Describe() + " is advertised as " + named.front()->resource + ")";
    }
    problems->push_back(msg);
  }
  return chosen;
}

// Gives the `chosen` devices to entry `i`; records devices that serve memory shares or that
// another entry already took.
void AssignEntry(const TimeSlicing& ts, size_t i, const std::vector<BaseDevice*>& chosen,
                 ProblemList* problems) {
  const std::string path = EntryPath(ts.resources[i], i);
  for (BaseDevice* d : chosen) {
    if (d->entry == kMemoryEntry) {
      problems->push_back(path + ".devices: " + d->Describe() + " serves memory shares (" +
                          std::string(kMemoryField) +
                          ".devices); a GPU serves one kind of share, remove it from one of them");
      continue;
    }
    if (d->entry >= 0 && d->entry != static_cast<int>(i)) {
      problems->push_back(path + ".devices: " + d->Describe() + " is also selected by " +
                          EntryPath(ts.resources[d->entry], d->entry) +
                          "; each device may be shared by one entry only");
      continue;
    }
    d->entry = static_cast<int>(i);
  }
}

// Applies each sharing entry's `devices` selector; records problems for selectors that match
// nothing and for devices selected twice.
void ApplySelectors(const TimeSlicing& ts, std::vector<BaseDevice>* devices, ProblemList* problems,
                    std::vector<std::string>* notes) {
  const SelectorIndex index(*devices);
  std::unordered_map<std::string, std::vector<BaseDevice*>> by_resource;
  for (auto& d : *devices) by_resource[d.resource].push_back(&d);
  std::vector<size_t> chosen_by(devices->size(),
                                SIZE_MAX);  // the entry that last chose each device
  for (size_t i = 0; i < ts.resources.size(); ++i) {
    const ReplicatedResource& r = ts.resources[i];
    const std::string path = EntryPath(r, i);
    const std::vector<BaseDevice*>& candidates = by_resource[r.name];
    std::vector<BaseDevice*> chosen;
    switch (r.devices.kind) {
      case DeviceSelector::Kind::kAll:
        if (candidates.empty()) {
          notes->push_back(path + ": this node has no " + r.name +
                           " devices; the entry is unused here");
        }
        chosen = candidates;
        break;
      case DeviceSelector::Kind::kCount:
        if (r.devices.count <= 0 || static_cast<size_t>(r.devices.count) > candidates.size()) {
          problems->push_back(path + ".devices: count " + std::to_string(r.devices.count) +
                              " must be 1.." + std::to_string(candidates.size()) +
                              " (this node has " + std::to_string(candidates.size()) + " " +
                              r.name + " devices)");
          break;
        }
        chosen.assign(candidates.begin(), candidates.begin() + r.devices.count);
        break;
      case DeviceSelector::Kind::kList:
        chosen = ChooseListed(r, i, index, devices->data(), &chosen_by, problems);
        break;
    }
    AssignEntry(ts, i, chosen, problems);
  }
}

// Where an advertised name comes from: unshared devices of a base resource (entry -1) or one
// sharing entry. Two sources may share a name only when they are entries with the same base
// resource and the same replica count.
struct NameSource {
  int entry = -1;
  std::string base;
  int replicas = 1;
};

// The GPUs gpushare.memoryShares.devices selects, in index order. `all` skips MIG-enabled GPUs
// (with a note); naming one explicitly is a problem.
std::vector<const Gpu*> SelectMemoryGpus(const Inventory& inv, const DeviceSelector& sel,
                                         ProblemList* problems, std::vector<std::string>* notes) {
  const std::string path = std::string(kMemoryField) + ".devices";
  std::vector<const Gpu*> out;
  auto mig_problem = [&](const std::string& where, const Gpu& g) {
    problems->push_back(where + ": GPU " + std::to_string(g.index) + " (" + g.uuid +
                        ") has MIG enabled; memory shares need a GPU without MIG");
  };
  switch (sel.kind) {
    case DeviceSelector::Kind::kAll:
      for (const Gpu& g : inv.gpus) {
        if (g.mig_enabled) {
          notes->push_back(path + ": GPU " + std::to_string(g.index) +
                           " has MIG enabled and does not serve memory shares");
          continue;
        }
        out.push_back(&g);
      }
      break;
    case DeviceSelector::Kind::kCount:
      if (sel.count <= 0 || static_cast<size_t>(sel.count) > inv.gpus.size()) {
        problems->push_back(path + ": count " + std::to_string(sel.count) + " must be 1.." +
                            std::to_string(inv.gpus.size()) + " (this node has " +
                            std::to_string(inv.gpus.size()) + " GPUs)");
        break;
      }
      for (int k = 0; k < sel.count; ++k) {
        const Gpu& g = inv.gpus[k];
        if (g.mig_enabled)
          mig_problem(path, g);
        else
          out.push_back(&g);
      }
      break;
    case DeviceSelector::Kind::kList:
      for (size_t j = 0; j < sel.items.size(); ++j) {
        const std::string& item = sel.items[j];
        const std::string where = path + "[" + std::to_string(j) + "]";
        const Gpu* g =
            IsUnsignedNumber(item) ? inv.FindByIndex(std::stoi(item)) : inv.FindByUuid(item);
        if (g == nullptr) {
          problems->push_back(where + ": \"" + item + "\" matches no GPU on this node");
          continue;
        }
        if (g->mig_enabled) {
          mig_problem(where, *g);
          continue;
        }
        out.push_back(g);
      }
      std::sort(out.begin(), out.end(),
                [](const Gpu* a, const Gpu* b) { return a->index < b->index; });
      out.erase(std::unique(out.begin(), out.end()), out.end());
      break;
  }
  return out;
}

// The memory-share resource: one device per unit of each selected GPU.
PlannedResource BuildMemoryResource(const std::vector<const Gpu*>& gpus, const MemoryShares& ms,
                                    std::vector<std::string>* notes) {
  PlannedResource pr;
  pr.name = ms.resource_name;
  pr.socket_name = SocketNameForResource(pr.name);
  pr.base_name = pr.name;
  pr.source_field = std::string(kMemoryField);
  pr.unit_mib = memshare::UnitMiB(ms.unit);
  for (const Gpu* g : gpus) {
    const int64_t units = memshare::UnitsForMemory(static_cast<int64_t>(g->memory_mib), ms.unit);
    if (units <= 0) {
      notes->push_back(std::string(kMemoryField) + ": GPU " + std::to_string(g->index) + " has " +
                       std::to_string(g->memory_mib) + " MiB, less than one " +
                       std::string(memshare::MemoryUnitName(ms.unit)) + "; it advertises no " +
                       pr.name);
      continue;
    }
    PlannedDevice base;
    base.gpu_index = g->index;
    base.gpu_uuid = g->uuid;
    base.device_uuid = g->uuid;
    base.device_index = std::to_string(g->index);
    if (g->numa_node >= 0) base.numa_nodes.push_back(g->numa_node);
    base.memory_mib = g->memory_mib;
    base.memory_limit_mib = static_cast<uint64_t>(pr.unit_mib);
    if (ms.compute_limit == MemoryComputeLimit::kProportional && g->memory_mib > 0)
      base.sm_share_ppm =
          static_cast<uint32_t>(static_cast<uint64_t>(pr.unit_mib) * 1'000'000u / g->memory_mib);
    for (int64_t j = 0; j < units; ++j) {
      PlannedDevice d = base;
      d.id = memshare::UnitDeviceId(g->uuid, j);
      d.replica = static_cast<int>(j);
      pr.devices.push_back(std::move(d));
    }
  }
  return pr;
}

// alibabacloud.com/gpu-milli on the GPUs that advertise memory units: 1,000 devices per GPU,
// each one thousandth of the GPU (its memory and, with computeLimit proportional, its SMs).
PlannedResource BuildMilliResource(const PlannedResource& memory, const MemoryShares& ms) {
  PlannedResource pr;
  pr.name = std::string(memshare::kMilliResource);
  pr.socket_name = SocketNameForResource(pr.name);
  pr.base_name = pr.name;
  pr.source_field = std::string(kMemoryField) + ".fractions";
  pr.gpu_milli = true;
  std::string last;
  for (const PlannedDevice& unit : memory.devices) {
    if (unit.gpu_uuid == last) continue;
    last = unit.gpu_uuid;
    PlannedDevice base = unit;
    base.memory_limit_mib = unit.memory_mib / memshare::kMilliPerGpu;
    base.sm_share_ppm = ms.compute_limit == MemoryComputeLimit::kProportional
                            ? static_cast<uint32_t>(1'000'000 / memshare::kMilliPerGpu)
                            : 0;
    base.gpu_milli = 1;
    for (int64_t j = 0; j < memshare::kMilliPerGpu; ++j) {
      PlannedDevice d = base;
      d.id = memshare::MilliDeviceId(unit.gpu_uuid, j);
      d.replica = static_cast<int>(j);
      pr.devices.push_back(std::move(d));
    }
  }
  return pr;
}

// Protobuf wire sizes.
int64_t VarintBytes(uint64_t v) {
  int64_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
int64_t LengthDelimited(int64_t len) {
  return 1 + VarintBytes(static_cast<uint64_t>(len)) + len;
}

std::string MiBText(int64_t bytes) {
  const int64_t tenths = (bytes * 10 + (1 << 20) - 1) >> 20;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
}

// One device's share of a ListAndWatchResponse (health "Unhealthy", as ListAndWatchBytes).
int64_t DeviceBytes(int64_t id_len, int64_t numa) {
  int64_t dev = LengthDelimited(9) + (id_len > 0 ? LengthDelimited(id_len) : 0);
  if (numa >= 0)
    dev += LengthDelimited(
        LengthDelimited(numa == 0 ? 0 : 1 + VarintBytes(static_cast<uint64_t>(numa))));
  return LengthDelimited(dev);
}

// ListAndWatchBytes of the memory-share resource, without building it.
int64_t MemoryListBytes(const std::vector<const Gpu*>& gpus, memshare::MemoryUnit unit) {
  int64_t total = 0;
  for (const Gpu* g : gpus) {
    const int64_t units = memshare::UnitsForMemory(static_cast<int64_t>(g->memory_mib), unit);
    const int64_t prefix = static_cast<int64_t>(g->uuid.size() + memshare::kUnitIdSeparator.size());
    for (int64_t digits = 1, lo = 0; lo < units; ++digits, lo = lo == 0 ? 10 : lo * 10) {
      const int64_t hi =
          std::min<int64_t>(units, lo == 0 ? 10 : lo * 10);  // j in [lo, hi) has `digits` digits
      total += (hi - lo) * DeviceBytes(prefix + digits, g->numa_node);
    }
  }
  return total;
}

std::string SizeProblem(const std::string& field, const std::string& name, int64_t devices,
                        int64_t bytes, bool mib_units) {
  const int64_t per_device = std::max<int64_t>(1, bytes / std::max<int64_t>(1, devices));
  std::string msg = field + ": " + std::to_string(devices) + " " + name +
                    " devices need a ListAndWatch message of " + MiBText(bytes) +
                    ", more than kubelet's 4 MiB gRPC limit (about " +
                    std::to_string(kMaxListAndWatchBytes / per_device) + " devices fit)";
  if (mib_units)
    msg += "; use unit GiB, or select fewer GPUs with " + std::string(kMemoryField) + ".devices";
  return msg;
}

// --- the steps of BuildResourcePlan -----------------------------------------------------------

// Marks the whole GPUs that serve memory shares (kMemoryEntry): they leave the whole-GPU devices.
void MarkMemoryGpus(const std::vector<const Gpu*>& memory_gpus, std::vector<BaseDevice>* devices) {
  for (auto& d : *devices) {
    if (d.mig == nullptr &&
        std::find(memory_gpus.begin(), memory_gpus.end(), d.gpu) != memory_gpus.end()) {
      d.entry = kMemoryEntry;
    }
  }
}

void CheckReplicas(const TimeSlicing& ts, int ceiling, ProblemList* problems) {
  for (size_t i = 0; i < ts.resources.size(); ++i) {
    const auto& r = ts.resources[i];
    if (r.replicas < 2 || r.replicas > ceiling) {
      problems->push_back(EntryPath(r, i) + ".replicas: must be 2.." + std::to_string(ceiling) +
                          ", got " + std::to_string(r.replicas));
    }
  }
}

// Advertised name -> the field that decides it, for messages.
using NameFields = std::map<std::string, std::string>;

// The name `d` is advertised under, where it comes from, and the field that decides it.
NameSource SourceOf(const BaseDevice& d, const TimeSlicing& ts, std::string* name,
                    std::string* field) {
  if (d.entry < 0) {
    *name = d.resource;
    *field = d.mig != nullptr
                 ? "MIG profile " + d.mig->profile + " of GPU " + std::to_string(d.gpu->index)
                 : "GPU " + std::to_string(d.gpu->index);
    return {-1, d.resource, 1};
  }
  const auto& r = ts.resources[d.entry];
  *name = AdvertisedName(r, ts);
  *field = NameField(r, d.entry, ts);
  return {d.entry, r.name, r.replicas};
}

// The problem of two sources advertising `name` (at least one of them a sharing entry).
std::string CollisionProblem(const std::string& name, const NameSource& have, const NameSource& src,
                             const std::vector<BaseDevice>& devices, const TimeSlicing& ts) {
  const int e = src.entry >= 0 ? src.entry : have.entry;
  const int other = src.entry >= 0 ? have.entry : src.entry;
  const auto& r = ts.resources[e];
  std::string msg = NameField(r, e, ts) + ": " + name + " collides with ";
  if (other < 0) {
    std::vector<std::string> left;
    for (const auto& x : devices) {
      if (x.entry < 0 && x.resource == name) left.push_back(x.Describe());
    }
    msg += "the " + name + " devices no sharing entry selects (";
    for (size_t k = 0; k < left.size(); ++k) msg += (k ? ", " : "") + left[k];
    msg += "); rename the entry (e.g. rename: " + name + ".shared) or select those devices too";
  } else {
    const auto& o = ts.resources[other];
    msg += EntryPath(o, other) + " (" + o.name + " x " + std::to_string(o.replicas) +
           "); one resource name cannot mix different devices or replica counts";
  }
  return msg;
}

// Who advertises what: records collisions between sources (each colliding pair once) and
// returns the names advertised by the devices, each with its field.
std::map<std::string, NameSource> CollectNames(const std::vector<BaseDevice>& devices,
                                               const TimeSlicing& ts, NameFields* name_field,
                                               ProblemList* problems) {
  std::map<std::string, NameSource> sources;
  std::set<std::tuple<std::string, int, int>> reported;
  for (const auto& d : devices) {
    if (d.entry == kMemoryEntry) continue;
    std::string name, field;
    const NameSource src = SourceOf(d, ts, &name, &field);
    auto [it, inserted] = sources.emplace(name, src);
    if (inserted) {
      (*name_field)[name] = field;
      continue;
    }
    const NameSource& have = it->second;
    if (have.entry == src.entry) continue;
    if (have.entry >= 0 && src.entry >= 0 && have.base == src.base && have.replicas == src.replicas)
      continue;
    if (!reported.insert({name, have.entry, src.entry}).second) continue;
    problems->push_back(CollisionProblem(name, have, src, devices, ts));
  }
  return sources;
}

// Names: collisions between sources, with the memory-share resource, and invalid names.
NameFields CheckNames(const std::vector<BaseDevice>& devices, const TimeSlicing& ts,
                      const MemoryShares& ms, bool memory_shares, ProblemList* problems) {
  NameFields name_field;
  const std::map<std::string, NameSource> sources =
      CollectNames(devices, ts, &name_field, problems);
  if (memory_shares && sources.count(ms.resource_name) > 0) {
    problems->push_back(std::string(kMemoryField) + ".resourceName: " + ms.resource_name +
                        " is also advertised by " + name_field[ms.resource_name] +
                        "; memory shares need a resource name of their own");
  }
  const std::string milli(memshare::kMilliResource);
  if (memory_shares && ms.fractions && sources.count(milli) > 0) {
    problems->push_back(std::string(kMemoryField) + ".fractions: " + milli +
                        " is also advertised by " + name_field[milli] +
                        "; turn fractions off or rename that resource");
  }
  for (const auto& [name, src] : sources) {
    std::string why = ExtendedResourceNameProblem(name);
    if (!why.empty()) {
      problems->push_back(name_field[name] + ": " + name +
                          " is not a valid extended resource name: " + why);
    }
  }
  return name_field;
}

// The per-GPU client ceiling, counting every advertised device on the physical GPU.
void CheckClientCeiling(const Gpu& g, const std::vector<BaseDevice>& devices, const TimeSlicing& ts,
                        int ceiling, ProblemList* problems) {
  int clients = 0;
  int mig_devices = 0;
  std::set<int> entries;
  for (const auto& d : devices) {
    if (d.gpu != &g) continue;
    if (d.mig != nullptr) ++mig_devices;
    if (d.entry >= 0) {
      clients += ts.resources[d.entry].replicas;
      entries.insert(d.entry);
    } else {
      clients += 1;
    }
  }
  if (entries.empty() || clients <= ceiling) return;
  const int e = *entries.begin();
  std::string msg = EntryPath(ts.resources[e], e) + ".replicas: GPU " + std::to_string(g.index) +
                    " (" + g.uuid + ") would have " + std::to_string(clients) + " clients";
  if (mig_devices > 0) {
    msg += " (" + std::to_string(mig_devices) + " MIG devices";
    if (entries.size() == 1) msg += " x " + std::to_string(ts.resources[e].replicas) + " replicas";
    msg += ")";
  }
  msg += ", more than gpushare.maxClientsPerGpu " + std::to_string(ceiling);
  problems->push_back(msg);
}

// Adds the memory-share resource to `by_name` (when it has devices); refuses one whose device
// list would not fit in a ListAndWatch message, sized before it is built: MiB units of large
// GPUs would be hundreds of thousands.
Status AddMemoryResource(const std::vector<const Gpu*>& memory_gpus, const MemoryShares& ms,
                         std::map<std::string, PlannedResource>* by_name, NameFields* name_field,
                         std::vector<std::string>* notes) {
  (*name_field)[ms.resource_name] = std::string(kMemoryField) + ".resourceName";
  const int64_t bytes = MemoryListBytes(memory_gpus, ms.unit);
  if (bytes > kMaxListAndWatchBytes) {
    int64_t count = 0;
    for (const Gpu* g : memory_gpus)
      count += memshare::UnitsForMemory(static_cast<int64_t>(g->memory_mib), ms.unit);
    return Status::InvalidArgument(SizeProblem(std::string(kMemoryField) + ".unit",
                                               ms.resource_name, count, bytes,
                                               ms.unit == memshare::MemoryUnit::kMiB));
  }
  PlannedResource pr = BuildMemoryResource(memory_gpus, ms, notes);
  if (pr.devices.empty()) return Status::Ok();
  if (ms.fractions) {
    PlannedResource milli = BuildMilliResource(pr, ms);
    // The size checked on what was built (1,000 devices per GPU: 16 GPUs take about 1.3 MB).
    if (const int64_t b = ListAndWatchBytes(milli); b > kMaxListAndWatchBytes)
      return Status::InvalidArgument(
          SizeProblem(std::string(kMemoryField) + ".fractions", milli.name,
                      static_cast<int64_t>(milli.devices.size()), b, false));
    (*name_field)[milli.name] = std::string(kMemoryField) + ".fractions";
    (*by_name)[milli.name] = std::move(milli);
  }
  (*by_name)[ms.resource_name] = std::move(pr);
  return Status::Ok();
}

// The device `d` stands for, before replicas (no id, no limits).
PlannedDevice PlannedBase(const BaseDevice& d) {
  PlannedDevice base;
  base.gpu_index = d.gpu->index;
  base.gpu_uuid = d.gpu->uuid;
  if (d.gpu->numa_node >= 0) base.numa_nodes.push_back(d.gpu->numa_node);
  base.is_mig = d.mig != nullptr;
  base.mig_index = d.mig != nullptr ? d.mig->index : -1;
  base.mig_gi = d.mig != nullptr ? d.mig->gpu_instance_id : -1;
  base.mig_ci = d.mig != nullptr ? d.mig->compute_instance_id : -1;
  base.device_uuid = d.Uuid();
  base.device_index = std::to_string(d.gpu->index);
  if (d.mig != nullptr) base.device_index += ":" + std::to_string(d.mig->index);
  base.memory_mib = d.mig != nullptr ? d.mig->memory_mib : d.gpu->memory_mib;
  return base;
}

// Adds `d` to the resource it is advertised under: itself, or its replicas with their limits.
void AddDevice(const BaseDevice& d, const TimeSlicing& ts, const GpushareSettings& gs,
               std::map<std::string, PlannedResource>* by_name) {
  const ReplicatedResource* r = d.entry >= 0 ? &ts.resources[d.entry] : nullptr;
  const std::string name = r != nullptr ? AdvertisedName(*r, ts) : d.resource;
  PlannedResource& pr = (*by_name)[name];
  if (pr.name.empty()) {
    pr.name = name;
    pr.socket_name = SocketNameForResource(name);
    pr.base_name = d.resource;
    pr.replicas = r != nullptr ? r->replicas : 1;
    pr.source_field = r != nullptr ? EntryPath(*r, d.entry) : "";
    pr.fail_requests_greater_than_one = r != nullptr && ts.fail_requests_greater_than_one;
  }
  PlannedDevice base = PlannedBase(d);
  if (r == nullptr) {
    base.id = base.device_uuid;
    pr.devices.push_back(base);
    return;
  }
  if (gs.replica_memory_limit == ReplicaMemoryLimit::kEvenSplit) {
    base.memory_limit_mib = base.memory_mib / static_cast<uint64_t>(r->replicas);
  }
  if (gs.replica_compute_limit == ReplicaComputeLimit::kEvenSplit) {
    base.sm_share_ppm = 1'000'000u / static_cast<uint32_t>(r->replicas);
  }
  for (int n = 0; n < r->replicas; ++n) {
    PlannedDevice rep = base;
    rep.replica = n;
    rep.id = base.device_uuid + "::" + std::to_string(n);
    pr.devices.push_back(std::move(rep));
  }
}

// Moves the built resources into the plan, in name order; records resources that would share a
// socket or whose device list would not fit in a ListAndWatch message.
void AddResources(std::map<std::string, PlannedResource>* by_name, NameFields* name_field,
                  ResourcePlan* plan, ProblemList* problems) {
  std::map<std::string, std::string> sockets;
  for (auto& [name, pr] : *by_name) {
    auto [it, inserted] = sockets.emplace(pr.socket_name, name);
    if (!inserted) {
      problems->push_back((*name_field)[name] + ": " + name + " and " + it->second +
                          " would both be served on socket " + pr.socket_name);
    }
    const int64_t bytes = ListAndWatchBytes(pr);
    if (bytes > kMaxListAndWatchBytes) {
      problems->push_back(SizeProblem((*name_field)[name], name,
                                      static_cast<int64_t>(pr.devices.size()), bytes, false));
    }
    plan->resources.push_back(std::move(pr));
  }
}

// A note when the plan has limits but no interposer directory is set to enforce them.
void NoteUnenforcedLimits(const GpushareSettings& gs, ResourcePlan* plan) {
  if (!gs.interposer_host_dir.empty()) return;
  bool memory = false, compute = false;
  for (const PlannedResource& r : plan->resources) {
    for (const PlannedDevice& d : r.devices) {
      memory = memory || d.memory_limit_mib != 0;
      compute = compute || d.sm_share_ppm != 0;
    }
  }
  if (memory || compute) {
    plan->notes.push_back(std::string("gpushare.interposer.hostDir is not set: the ") +
                          (memory && compute ? "memory and compute"
                           : memory          ? "memory"
                                             : "compute") +
                          " limits of this plan are advertised but not enforced in containers "
                          "(set it to the host directory holding libgpushare-cuda.so)");
  }
}

}  // namespace

int64_t ListAndWatchBytes(const PlannedResource& resource) {
  int64_t total = 0;
  const int64_t health =
      LengthDelimited(static_cast<int64_t>(std::string_view("Unhealthy").size()));
  for (const PlannedDevice& d : resource.devices) {
    int64_t dev = health;
    if (!d.id.empty()) dev += LengthDelimited(static_cast<int64_t>(d.id.size()));
    if (!d.numa_nodes.empty()) {
      int64_t topo = 0;
      for (int64_t n : d.numa_nodes)
        topo += LengthDelimited(n == 0 ? 0 : 1 + VarintBytes(static_cast<uint64_t>(n)));
      dev += LengthDelimited(topo);
    }
    total += LengthDelimited(dev);
  }
  return total;
}

const PlannedResource* ResourcePlan::Find(const std::string& name) const {
  for (const auto& r : resources) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string SocketNameForResource(const std::string& resource_name) {
  std::string_view name(resource_name);
  std::string base;
  if (name.substr(0, 11) == "nvidia.com/") {
    base = std::string(name.substr(11));
  } else {
    base = std::string(name);
  }
  for (char& c : base) {
    if (c == '/') c = '-';
  }
  return "gpushare-" + base + ".sock";
}

Result<ResourcePlan> BuildResourcePlan(const Inventory& inventory, const NodeConfig& config) {
  ProblemList problems;
  ResourcePlan plan;
  const TimeSlicing& ts = config.time_slicing;
  const int ceiling = config.gpushare.max_clients_per_gpu;

  std::vector<BaseDevice> devices;
  CollectBaseDevices(inventory, config.mig_strategy, &devices, &problems, &plan.notes);
  // Memory shares take their GPUs out of the whole-GPU devices.
  const MemoryShares& ms = config.gpushare.memory_shares;
  std::vector<const Gpu*> memory_gpus;
  if (ms.enabled()) memory_gpus = SelectMemoryGpus(inventory, *ms.devices, &problems, &plan.notes);
  MarkMemoryGpus(memory_gpus, &devices);
  CheckReplicas(ts, ceiling, &problems);
  if (problems.empty()) ApplySelectors(ts, &devices, &problems, &plan.notes);
  NameFields name_field = CheckNames(devices, ts, ms, !memory_gpus.empty(), &problems);
  for (const auto& g : inventory.gpus) CheckClientCeiling(g, devices, ts, ceiling, &problems);
  if (!problems.empty()) return Status::InvalidArgument(problems.Joined());

  // Build the resources.
  std::map<std::string, PlannedResource> by_name;
  if (!memory_gpus.empty()) {
    GPUSHARE_RETURN_IF_ERROR(
        AddMemoryResource(memory_gpus, ms, &by_name, &name_field, &plan.notes));
  }
  for (const auto& d : devices) {
    if (d.entry != kMemoryEntry) AddDevice(d, ts, config.gpushare, &by_name);
  }
  AddResources(&by_name, &name_field, &plan, &problems);
  if (!problems.empty()) return Status::InvalidArgument(problems.Joined());
  NoteUnenforcedLimits(config.gpushare, &plan);
  plan.notes = CapLines(std::move(plan.notes), "notes");
  return plan;
}

}  // namespace gpushare
