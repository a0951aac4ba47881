#include "core/memshare.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "core/json.h"

namespace gpushare::memshare {
namespace {

// Field readers: each returns an error naming `path`.
Status WantInt(const json::Value* v, const std::string& path, int64_t lo, int64_t hi,
               int64_t* out) {
  if (v == nullptr) return Status::InvalidArgument(path + ": missing");
  if (v->type != json::Value::Type::kNumber || !v->is_int || v->i < lo || v->i > hi)
    return Status::InvalidArgument(path + ": must be an integer in " + std::to_string(lo) + ".." +
                                   std::to_string(hi) + ", got " + json::Spelling(*v));
  *out = v->i;
  return Status::Ok();
}

Status WantString(const json::Value* v, const std::string& path, bool required, std::string* out) {
  if (v == nullptr) {
    if (required) return Status::InvalidArgument(path + ": missing");
    return Status::Ok();
  }
  if (v->type != json::Value::Type::kString)
    return Status::InvalidArgument(path + ": must be a string, got " + json::Spelling(*v));
  *out = v->s;
  return Status::Ok();
}

bool ParseNonNegative(std::string_view s, int64_t* out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return false;
  *out = v;
  return true;
}

std::optional<int> ParseGpuIndex(std::string_view s) {
  int64_t v = 0;
  if (!ParseNonNegative(s, &v) || v > 1023) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

// --- units -----------------------------------------------------------------------------------

std::string_view MemoryUnitName(MemoryUnit u) {
  return u == MemoryUnit::kMiB ? "MiB" : "GiB";
}

std::optional<MemoryUnit> ParseMemoryUnit(std::string_view s) {
  if (s == "GiB") return MemoryUnit::kGiB;
  if (s == "MiB") return MemoryUnit::kMiB;
  return std::nullopt;
}

int64_t UnitMiB(MemoryUnit u) {
  return u == MemoryUnit::kMiB ? 1 : 1024;
}

int64_t UnitsForMemory(int64_t memory_mib, MemoryUnit u) {
  return memory_mib <= 0 ? 0 : memory_mib / UnitMiB(u);
}

// --- device IDs ------------------------------------------------------------------------------

std::string UnitDeviceId(std::string_view gpu_uuid, int64_t j) {
  return std::string(gpu_uuid) + std::string(kUnitIdSeparator) + std::to_string(j);
}

std::string MilliDeviceId(std::string_view gpu_uuid, int64_t j) {
  return std::string(gpu_uuid) + std::string(kUnitIdSeparator) + "m" + std::to_string(j);
}

Result<UnitId> ParseUnitDeviceId(std::string_view id) {
  const size_t sep = id.rfind(kUnitIdSeparator);
  const std::string quoted = "device ID \"" + std::string(id) + "\"";
  if (sep == std::string_view::npos)
    return Status::InvalidArgument(quoted + ": not a memory unit (want <GPU-uuid>-_-<n>)");
  UnitId out;
  out.gpu_uuid = std::string(id.substr(0, sep));
  if (out.gpu_uuid.empty()) return Status::InvalidArgument(quoted + ": empty GPU UUID");
  std::string_view number = id.substr(sep + kUnitIdSeparator.size());
  if (!number.empty() && number.front() == 'm') {
    out.milli = true;
    number.remove_prefix(1);
  }
  if (!ParseNonNegative(number, &out.j))
    return Status::InvalidArgument(quoted + ": unit number must be a non-negative decimal");
  return out;
}

// --- node inventory --------------------------------------------------------------------------

const InventoryGpu* NodeInventory::FindByIndex(int index) const {
  for (const auto& g : gpus)
    if (g.index == index) return &g;
  return nullptr;
}

const InventoryGpu* NodeInventory::FindByUuid(std::string_view uuid) const {
  for (const auto& g : gpus)
    if (g.uuid == uuid) return &g;
  return nullptr;
}

std::string EncodeInventory(const NodeInventory& inv) {
  std::string out = "{\"version\":" + std::to_string(inv.version) +
                    ",\"unit\":" + json::Quote(MemoryUnitName(inv.unit)) +
                    ",\"maxClientsPerGpu\":" + std::to_string(inv.max_clients_per_gpu) +
                    ",\"gpus\":[";
  for (size_t k = 0; k < inv.gpus.size(); ++k) {
    const InventoryGpu& g = inv.gpus[k];
    if (k) out += ",";
    out += "{\"index\":" + std::to_string(g.index) + ",\"uuid\":" + json::Quote(g.uuid) +
           ",\"model\":" + json::Quote(g.model) + ",\"memoryMiB\":" + std::to_string(g.memory_mib) +
           ",\"units\":" + std::to_string(g.units) +
           ",\"health\":" + json::Quote(g.healthy ? "Healthy" : "Unhealthy") +
           ",\"mode\":" + json::Quote(g.mode) + "}";
  }
  return out + "]}";
}

Result<NodeInventory> DecodeInventory(std::string_view json) {
  Result<json::Value> doc = json::Parse(json);
  if (!doc.ok()) return doc.status();
  const json::Value& root = *doc;
  if (root.type != json::Value::Type::kObject)
    return Status::InvalidArgument("inventory: must be a JSON object, got " +
                                   std::string(json::TypeName(root.type)));
  NodeInventory inv;
  int64_t version = 0;
  GPUSHARE_RETURN_IF_ERROR(
      WantInt(root.Find("version"), "version", 1, std::numeric_limits<int32_t>::max(), &version));
  if (version > kInventoryVersion)
    return Status::InvalidArgument(
        "version: " + std::to_string(version) +
        " was written by a newer gpushare-node; this build reads version " +
        std::to_string(kInventoryVersion));
  inv.version = static_cast<int>(version);
  std::string unit;
  GPUSHARE_RETURN_IF_ERROR(WantString(root.Find("unit"), "unit", true, &unit));
  std::optional<MemoryUnit> u = ParseMemoryUnit(unit);
  if (!u)
    return Status::InvalidArgument("unit: must be \"GiB\" or \"MiB\", got " + json::Quote(unit));
  inv.unit = *u;
  int64_t clients = 48;
  if (root.Find("maxClientsPerGpu") != nullptr)
    GPUSHARE_RETURN_IF_ERROR(
        WantInt(root.Find("maxClientsPerGpu"), "maxClientsPerGpu", 1, 1024, &clients));
  inv.max_clients_per_gpu = static_cast<int>(clients);
  const json::Value* gpus = root.Find("gpus");
  if (gpus == nullptr) return Status::InvalidArgument("gpus: missing");
  if (gpus->type != json::Value::Type::kArray)
    return Status::InvalidArgument("gpus: must be an array, got " +
                                   std::string(json::TypeName(gpus->type)));
  std::set<int64_t> indices;
  std::set<std::string> uuids;
  for (size_t k = 0; k < gpus->items.size(); ++k) {
    const json::Value& g = gpus->items[k];
    const std::string path = "gpus[" + std::to_string(k) + "]";
    if (g.type != json::Value::Type::kObject)
      return Status::InvalidArgument(path + ": must be an object, got " +
                                     std::string(json::TypeName(g.type)));
    InventoryGpu out;
    int64_t index = 0, mem = 0, units = 0;
    GPUSHARE_RETURN_IF_ERROR(WantInt(g.Find("index"), path + ".index", 0, 1023, &index));
    if (!indices.insert(index).second)
      return Status::InvalidArgument(path + ".index: " + std::to_string(index) + " appears twice");
    out.index = static_cast<int>(index);
    GPUSHARE_RETURN_IF_ERROR(WantString(g.Find("uuid"), path + ".uuid", true, &out.uuid));
    if (out.uuid.empty()) return Status::InvalidArgument(path + ".uuid: must not be empty");
    if (!uuids.insert(out.uuid).second)
      return Status::InvalidArgument(path + ".uuid: " + json::Quote(out.uuid) + " appears twice");
    GPUSHARE_RETURN_IF_ERROR(WantString(g.Find("model"), path + ".model", false, &out.model));
    GPUSHARE_RETURN_IF_ERROR(
        WantInt(g.Find("memoryMiB"), path + ".memoryMiB", 0, int64_t{1} << 40, &mem));
    GPUSHARE_RETURN_IF_ERROR(
        WantInt(g.Find("units"), path + ".units", 0, int64_t{1} << 40, &units));
    out.memory_mib = mem;
    out.units = units;
    std::string health = "Healthy";
    GPUSHARE_RETURN_IF_ERROR(WantString(g.Find("health"), path + ".health", false, &health));
    if (health != "Healthy" && health != "Unhealthy")
      return Status::InvalidArgument(path + ".health: must be \"Healthy\" or \"Unhealthy\", got " +
                                     json::Quote(health));
    out.healthy = health == "Healthy";
    GPUSHARE_RETURN_IF_ERROR(WantString(g.Find("mode"), path + ".mode", false, &out.mode));
    inv.gpus.push_back(std::move(out));
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const InventoryGpu& a, const InventoryGpu& b) { return a.index < b.index; });
  return inv;
}

// --- requests --------------------------------------------------------------------------------

int64_t PodRequest::PodUnits() const {
  int64_t total = 0;
  for (const auto& c : app) total += c.units;
  return total;
}

int64_t PodRequest::MaxInitUnits() const {
  int64_t m = 0;
  for (const auto& c : init) m = std::max(m, c.units);
  return m;
}

std::vector<int64_t> PodRequest::Demands() const {
  std::vector<int64_t> out;
  for (const auto& c : app) out.push_back(c.units);
  if (out.empty()) {
    if (!init.empty()) out.push_back(MaxInitUnits());
  } else {
    out[0] = std::max(out[0], MaxInitUnits());
  }
  return out;
}

std::vector<std::string> PodRequest::DemandContainers() const {
  std::vector<std::string> out;
  for (const auto& c : app) out.push_back(c.name);
  if (out.empty() && !init.empty()) out.push_back(init.front().name);
  return out;
}

int64_t UniformShareUnits(const NodeInventory& inv) {
  int64_t units = 0;
  for (const InventoryGpu& g : inv.gpus) {
    if (!g.ServesMemoryShares()) continue;
    if (units != 0 && g.units != units) return 0;
    units = g.units;
  }
  return units;
}

std::string WholeGpuSlotName(std::string_view container, int i) {
  return std::string(container) + "/" + std::to_string(i);
}

std::string_view SlotContainer(std::string_view slot) {
  const size_t cut = slot.find('/');
  return cut == std::string_view::npos ? slot : slot.substr(0, cut);
}

Result<PodRequest> PodRequest::Resolve(int64_t gpu_units) const {
  if (!unresolved()) return *this;
  if (gpu_units <= 0)
    return Status::FailedPrecondition("no memory-share GPU size to resolve " +
                                      std::string(kMilliResource) + " against");
  PodRequest out;
  out.selector = selector;
  for (const ContainerShare& c : app) {
    if (c.milli < kMilliPerGpu) {
      // Rounded up: fractions that sum to at most 1000 milli always fit the GPU's units.
      const int64_t units = (c.milli * gpu_units + kMilliPerGpu - 1) / kMilliPerGpu;
      out.app.push_back({c.name, std::max<int64_t>(units, 1), c.milli, false, c.index, c.core});
      continue;
    }
    const int64_t gpus = c.milli / kMilliPerGpu;
    for (int64_t i = 0; i < gpus; ++i)
      out.app.push_back({i == 0 ? c.name : WholeGpuSlotName(c.name, static_cast<int>(i)), gpu_units,
                         c.milli, true, c.index});
  }
  return out;
}

PodRequest PodRequest::InMilliUnits(int64_t gpu_units) const {
  PodRequest out = *this;
  for (std::vector<ContainerShare>* list : {&out.init, &out.app})
    for (ContainerShare& c : *list)
      c.units = c.milli > 0 && !c.whole && c.milli < kMilliPerGpu && gpu_units > 0
                    ? c.milli * gpu_units
                    : c.units * kMilliPerGpu;
  return out;
}

int64_t PodRequest::CoreSum() const {
  int64_t sum = 0;
  for (const ContainerShare& c : app) sum += c.core;
  return sum;
}

std::vector<int64_t> PodRequest::ShapeKey() const {
  std::vector<int64_t> out = Demands();
  for (size_t i = 0; i < app.size() && i < out.size(); ++i)
    if (app[i].whole) out[i] = -out[i];
  return out;
}

namespace {

Status MilliShare(const ContainerUnits& c, const std::string& what, int64_t* milli) {
  const std::string name(kMilliResource);
  if ((c.milli_limit && *c.milli_limit < 0) || (c.milli_request && *c.milli_request < 0))
    return Status::InvalidArgument(what + ": " + name + " must not be negative");
  if (c.milli_limit && c.milli_request && *c.milli_limit != *c.milli_request)
    return Status::InvalidArgument(what + ": " + name + " request " +
                                   std::to_string(*c.milli_request) + " differs from limit " +
                                   std::to_string(*c.milli_limit) +
                                   " (extended resources cannot be overcommitted)");
  *milli = c.milli_limit ? *c.milli_limit : c.milli_request.value_or(0);
  if (*milli == 0) return Status::Ok();
  if (c.init)
    return Status::InvalidArgument(what + ": " + name + " is for app containers only (an init " +
                                   "container may ask " + std::string(kResourceName) + ")");
  if (*milli >= kMilliPerGpu &&
      (*milli % kMilliPerGpu != 0 || *milli / kMilliPerGpu > kMaxWholeGpusPerContainer))
    return Status::InvalidArgument(
        what + ": " + name + " " + std::to_string(*milli) +
        " is neither a fraction of one GPU (1..999) nor whole GPUs (1000, 2000, ... " +
        std::to_string(kMaxWholeGpusPerContainer * kMilliPerGpu) + ")");
  return Status::Ok();
}

// One spelling of a compute share: `limit` wins, else `request`; negative, a request other than
// the limit, or above 100 are errors naming `name`.
Status CoreAsked(const std::optional<int64_t>& limit, const std::optional<int64_t>& request,
                 std::string_view name, const std::string& what, int64_t* core) {
  const std::string n(name);
  if ((limit && *limit < 0) || (request && *request < 0))
    return Status::InvalidArgument(what + ": " + n + " must not be negative");
  if (limit && request && *limit != *request)
    return Status::InvalidArgument(what + ": " + n + " request " + std::to_string(*request) +
                                   " differs from limit " + std::to_string(*limit) +
                                   " (extended resources cannot be overcommitted)");
  *core = limit ? *limit : request.value_or(0);
  if (*core > kMaxCorePercent)
    return Status::InvalidArgument(what + ": " + n + " " + std::to_string(*core) +
                                   " is above 100 (percent of one GPU's compute)");
  return Status::Ok();
}

// A container's compute share (0: none), from ACK's and HAMi's names; errors name the field.
// The error for a compute share in a container without a memory share or fraction.
Status CoreWithoutShare(const std::string& what, std::string_view name) {
  return Status::InvalidArgument(
      what + ": " + std::string(name) + " needs a memory share in the same container (" +
      std::string(kResourceName) + ", or a fraction of " + std::string(kMilliResource) + ")");
}

Status CoreShare(const ContainerUnits& c, const std::string& what, int64_t milli, int64_t* core) {
  int64_t ack = 0, hami = 0;
  GPUSHARE_RETURN_IF_ERROR(CoreAsked(c.core_limit, c.core_request, kCoreResource, what, &ack));
  GPUSHARE_RETURN_IF_ERROR(
      CoreAsked(c.hami_core_limit, c.hami_core_request, kHamiCoreResource, what, &hami));
  if (ack > 0 && hami > 0 && ack != hami)
    return Status::InvalidArgument(what + ": " + std::string(kCoreResource) + " " +
                                   std::to_string(ack) + " and " + std::string(kHamiCoreResource) +
                                   " " + std::to_string(hami) + " disagree (give one of the two)");
  *core = ack > 0 ? ack : hami;
  const std::string name(ack > 0 ? kCoreResource : kHamiCoreResource);
  if (*core == 0) return Status::Ok();
  if (c.init) return Status::InvalidArgument(what + ": " + name + " is for app containers only");
  if (AsksWholeGpus(milli))
    return Status::InvalidArgument(what + ": " + name + " with whole GPUs (" +
                                   std::string(kMilliResource) + " " + std::to_string(milli) +
                                   "): a whole GPU is not compute-limited; ask a fraction");
  return Status::Ok();
}

}  // namespace

Result<PodRequest> ComputePodRequest(const std::vector<ContainerUnits>& containers) {
  PodRequest out;
  std::set<std::string> names;
  std::string mem_owner, milli_owner;  // a container of each kind, for the mix error
  Status orphan_core = Status::Ok();   // a compute share without a share in its container
  int next_index[2] = {0, 0};          // app, init: the position in its spec list
  for (const ContainerUnits& c : containers) {
    const int index = next_index[c.init ? 1 : 0]++;
    const std::string what =
        std::string(c.init ? "init container" : "container") + " \"" + c.name + "\"";
    if (!names.insert(c.name).second)
      return Status::InvalidArgument(what + ": duplicate container name");
    if ((c.limit && *c.limit < 0) || (c.request && *c.request < 0))
      return Status::InvalidArgument(what + ": " + std::string(kResourceName) +
                                     " must not be negative");
    if (c.limit && c.request && *c.limit != *c.request)
      return Status::InvalidArgument(what + ": " + std::string(kResourceName) + " request " +
                                     std::to_string(*c.request) + " differs from limit " +
                                     std::to_string(*c.limit) +
                                     " (extended resources cannot be overcommitted)");
    const int64_t units = c.limit ? *c.limit : c.request.value_or(0);
    int64_t milli = 0;
    GPUSHARE_RETURN_IF_ERROR(MilliShare(c, what, &milli));
    if (units > 0 && mem_owner.empty()) mem_owner = what;
    if (milli > 0 && milli_owner.empty()) milli_owner = what;
    if (!mem_owner.empty() && !milli_owner.empty())
      return Status::InvalidArgument(
          (mem_owner == milli_owner ? mem_owner + " asks both "
                                    : mem_owner + " and " + milli_owner + " ask ") +
          std::string(kResourceName) + " and " + std::string(kMilliResource) +
          ": a pod asks GPU memory in one of the two, not both");
    int64_t core = 0;
    GPUSHARE_RETURN_IF_ERROR(CoreShare(c, what, milli, &core));
    if (core > 0 && units == 0 && milli == 0 && orphan_core.ok()) {
      // An error only in a pod that asks shares: elsewhere (HAMi's nvidia.com/gpucores beside
      // nvidia.com/gpu) the pod is not gpushare-scheduler's to place.
      const bool ack = c.core_limit.value_or(c.core_request.value_or(0)) > 0;
      orphan_core = CoreWithoutShare(what, ack ? kCoreResource : kHamiCoreResource);
    }
    if (milli > 0) {
      out.app.push_back({c.name, 0, milli, false, index, core});
      continue;
    }
    if (units == 0) continue;
    (c.init ? out.init : out.app).push_back({c.name, units, 0, false, index, core});
  }
  if (!out.empty() && !orphan_core.ok()) return orphan_core;
  // Two containers that ask the same first request with other compute shares: kubelet names
  // neither, and gpushare-node could not tell which share is whose.
  for (size_t i = 0; i < out.app.size(); ++i)
    for (size_t j = i + 1; j < out.app.size(); ++j) {
      const ContainerShare& a = out.app[i];
      const ContainerShare& b = out.app[j];
      if (a.units != b.units || a.milli != b.milli || a.core == b.core) continue;
      return Status::InvalidArgument(
          "containers \"" + a.name + "\" and \"" + b.name + "\" ask the same " +
          (a.milli > 0 ? std::string(kMilliResource) : std::string(kResourceName)) +
          " with other compute shares (" + std::to_string(a.core) + "% and " +
          std::to_string(b.core) +
          "%): gpushare-node could not tell them apart; give them "
          "the same share or other sizes");
    }
  if (out.CoreSum() > 0 && !out.init.empty())
    return Status::InvalidArgument(
        "init container \"" + out.init.front().name + "\" asks " + std::string(kResourceName) +
        " in a pod with a compute share (" + std::string(kCoreResource) +
        "): not supported (gpushare-node tells containers apart by their first request; give " +
        "the init container no GPU memory, or the pod no compute share)");
  return out;
}

// --- assignments -----------------------------------------------------------------------------

std::string EncodeContainerGpus(const ContainerGpus& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, gpu] : m) {
    if (!first) out += ",";
    first = false;
    out += json::Quote(name) + ":" + std::to_string(gpu);
  }
  return out + "}";
}

Result<ContainerGpus> DecodeContainerGpus(std::string_view json) {
  Result<json::Value> doc = json::Parse(json);
  if (!doc.ok()) return doc.status();
  if (doc->type != json::Value::Type::kObject)
    return Status::InvalidArgument("must be a JSON object {container: GPU index}, got " +
                                   std::string(json::TypeName(doc->type)));
  ContainerGpus out;
  for (const auto& [name, v] : doc->members) {
    int64_t idx = 0;
    GPUSHARE_RETURN_IF_ERROR(WantInt(&v, json::Quote(name), 0, 1023, &idx));
    out[name] = static_cast<int>(idx);
  }
  return out;
}

ContainerGpus AssignContainers(const PodRequest& request, const std::vector<int>& demand_gpus) {
  ContainerGpus out;
  if (demand_gpus.empty()) return out;
  for (size_t k = 0; k < request.app.size() && k < demand_gpus.size(); ++k)
    out[request.app[k].name] = demand_gpus[k];
  for (const auto& c : request.init) out[c.name] = demand_gpus[0];
  return out;
}

std::map<int, GpuUse> GpuUsage(const PodRequest& request, const ContainerGpus& gpus,
                               std::vector<std::string>* missing) {
  std::map<int, int64_t> app_units, init_max, app_core;
  std::map<int, int> app_clients;
  for (const auto& c : request.app) {
    auto it = gpus.find(c.name);
    if (it == gpus.end()) {
      if (missing) missing->push_back(c.name);
      continue;
    }
    app_units[it->second] += c.units;
    app_clients[it->second] += 1;
    app_core[it->second] += c.core;
  }
  for (const auto& c : request.init) {
    auto it = gpus.find(c.name);
    if (it == gpus.end()) {
      if (missing) missing->push_back(c.name);
      continue;
    }
    init_max[it->second] = std::max(init_max[it->second], c.units);
  }
  std::map<int, GpuUse> out;
  for (const auto& [g, u] : app_units) out[g] = {u, app_clients[g], app_core[g]};
  for (const auto& [g, u] : init_max) {
    GpuUse& use = out[g];
    use.units = std::max(use.units, u);
    if (use.clients == 0) use.clients = 1;
  }
  return out;
}

std::string EncodeAssumeTime(int64_t unix_nanos) {
  return std::to_string(unix_nanos);
}

std::optional<int64_t> DecodeAssumeTime(std::string_view s) {
  int64_t v = 0;
  if (!ParseNonNegative(s, &v)) return std::nullopt;
  return v;
}

std::map<std::string, std::string> BindAnnotations(const PodRequest& request,
                                                   const std::vector<int>& demand_gpus,
                                                   int64_t dev_units, int64_t assume_unix_nanos) {
  std::map<std::string, std::string> a;
  const ContainerGpus assigned = AssignContainers(request, demand_gpus);
  a[std::string(kIdxKey)] = demand_gpus.empty() ? "-1" : std::to_string(demand_gpus[0]);
  a[std::string(kPodKey)] = std::to_string(request.PodUnits());
  a[std::string(kDevKey)] = std::to_string(dev_units);
  a[std::string(kAssignedKey)] = "false";
  a[std::string(kAssumeTimeKey)] = EncodeAssumeTime(assume_unix_nanos);
  a[std::string(kAssumedAnnotation)] = EncodeContainerGpus(assigned);
  a[std::string(kAckAllocationKey)] = EncodeAckAllocation(request, assigned);
  a[std::string(kAckAssignedKey)] = "false";
  a[std::string(kAckAssumeTimeKey)] = EncodeAssumeTime(assume_unix_nanos);
  return a;
}

std::map<std::string, std::string> ConfirmAnnotations(const PodRequest& request,
                                                      const ContainerGpus& actual) {
  std::map<std::string, std::string> a;
  a[std::string(kAssignedKey)] = "true";
  const std::vector<std::string> owners = request.DemandContainers();
  if (!owners.empty()) {
    auto it = actual.find(owners[0]);
    if (it != actual.end()) a[std::string(kIdxKey)] = std::to_string(it->second);
  }
  a[std::string(kConfirmedAnnotation)] = EncodeContainerGpus(actual);
  a[std::string(kAckAllocationKey)] = EncodeAckAllocation(request, actual);
  a[std::string(kAckAssignedKey)] = "true";
  return a;
}

std::string EncodeAckAllocation(const PodRequest& request, const ContainerGpus& gpus) {
  std::map<int, std::map<int, int64_t>> by_index;  // container index -> GPU -> units
  for (const ContainerShare& c : request.app) {
    auto g = gpus.find(c.name);
    if (c.index < 0 || g == gpus.end()) continue;
    by_index[c.index][g->second] += c.units;
  }
  std::string out = "{";
  for (const auto& [index, per_gpu] : by_index) {
    if (out.size() > 1) out += ",";
    out += "\"" + std::to_string(index) + "\":{";
    bool first = true;
    for (const auto& [gpu, units] : per_gpu) {
      if (!first) out += ",";
      first = false;
      out += "\"" + std::to_string(gpu) + "\":" + std::to_string(units);
    }
    out += "}";
  }
  return out + "}";
}

Result<ContainerGpus> DecodeAckAllocation(std::string_view json, const PodRequest& request) {
  Result<json::Value> doc = json::Parse(json);
  if (!doc.ok()) return doc.status();
  if (doc->type != json::Value::Type::kObject)
    return Status::InvalidArgument(
        "must be a JSON object {container index: {GPU index: units}}, got " +
        std::string(json::TypeName(doc->type)));
  ContainerGpus out;
  for (const auto& [key, per_gpu] : doc->members) {
    const std::optional<int> index = ParseGpuIndex(key);
    if (!index) return Status::InvalidArgument(json::Quote(key) + ": not a container index");
    if (per_gpu.type != json::Value::Type::kObject)
      return Status::InvalidArgument(json::Quote(key) +
                                     ": must be an object {GPU index: units}, got " +
                                     std::string(json::TypeName(per_gpu.type)));
    std::vector<int> on;  // its GPUs, in order
    for (const auto& [gpu, units] : per_gpu.members) {
      const std::optional<int> g = ParseGpuIndex(gpu);
      if (!g)
        return Status::InvalidArgument(json::Quote(key) + ": " + json::Quote(gpu) +
                                       ": not a GPU index");
      int64_t u = 0;
      GPUSHARE_RETURN_IF_ERROR(
          WantInt(&units, json::Quote(key) + ": " + json::Quote(gpu), 0, int64_t{1} << 40, &u));
      on.push_back(*g);
    }
    std::sort(on.begin(), on.end());
    size_t next = 0;  // the container's demands (c, c/1, ...) take its GPUs in order
    for (const ContainerShare& c : request.app)
      if (c.index == *index && next < on.size()) out[c.name] = on[next++];
  }
  return out;
}

std::string_view AssignmentStateName(AssignmentState s) {
  switch (s) {
    case AssignmentState::kNone:
      return "none";
    case AssignmentState::kAssumed:
      return "assumed";
    case AssignmentState::kConfirmed:
      return "confirmed";
  }
  return "?";
}

PodAssignment ResolveAssignment(const std::map<std::string, std::string>& annotations,
                                const PodRequest& request) {
  PodAssignment out;
  auto get = [&](std::string_view key) -> const std::string* {
    auto it = annotations.find(std::string(key));
    return it == annotations.end() ? nullptr : &it->second;
  };
  std::optional<int> idx;
  if (const std::string* v = get(kIdxKey)) {
    idx = ParseGpuIndex(*v);
    if (!idx && *v != "-1")
      out.problems.push_back(std::string(kIdxKey) + ": not a GPU index: \"" + *v + "\"");
  }
  auto read_map = [&](std::string_view key) -> std::optional<ContainerGpus> {
    const std::string* v = get(key);
    if (v == nullptr) return std::nullopt;
    Result<ContainerGpus> m = DecodeContainerGpus(*v);
    if (!m.ok()) {
      out.problems.push_back(std::string(key) + ": " + m.status().message());
      return std::nullopt;
    }
    return *m;
  };
  const std::optional<ContainerGpus> confirmed = read_map(kConfirmedAnnotation);
  const std::optional<ContainerGpus> assumed = read_map(kAssumedAnnotation);
  std::optional<ContainerGpus> ack;
  if (const std::string* v = get(kAckAllocationKey); v != nullptr && !confirmed && !assumed) {
    Result<ContainerGpus> m = DecodeAckAllocation(*v, request);
    if (m.ok()) {
      ack = std::move(m).value();
    } else {
      out.problems.push_back(std::string(kAckAllocationKey) + ": " + m.status().message());
    }
  }
  const ContainerGpus* source = confirmed ? &*confirmed
                                : assumed ? &*assumed
                                : ack     ? &*ack
                                          : nullptr;
  if (const std::string* t = get(kAssumeTimeKey)) {
    out.assume_time = DecodeAssumeTime(*t);
    if (!out.assume_time)
      out.problems.push_back(std::string(kAssumeTimeKey) + ": not UnixNano: \"" + *t + "\"");
  }
  if (request.empty()) return out;
  ContainerGpus gpus;
  std::vector<const ContainerShare*> all;
  for (const auto& c : request.init) all.push_back(&c);
  for (const auto& c : request.app) all.push_back(&c);
  for (const ContainerShare* c : all) {
    std::optional<int> g;
    if (source) {
      auto it = source->find(c->name);
      if (it != source->end()) g = it->second;
    }
    if (!g) g = idx;
    if (!g) {
      if (get(kIdxKey) || get(kAssumedAnnotation) || get(kConfirmedAnnotation) ||
          get(kAssignedKey) || get(kAckAllocationKey))
        out.problems.push_back("container \"" + c->name + "\" has no GPU in the annotations");
      return out;
    }
    gpus[c->name] = *g;
  }
  out.planned = gpus;
  if (assumed) {
    out.has_plan = true;
    for (auto& [c, g] : out.planned) {
      auto it = assumed->find(c);
      if (it != assumed->end()) g = it->second;
    }
  }
  out.gpus = std::move(gpus);
  const std::string* assigned = get(kAssignedKey);
  const std::string* ack_assigned = get(kAckAssignedKey);
  // ACK's assigned counts only on a pod without Alibaba's first one (a pod ACK's scheduler and
  // device plugin wrote): where both are, they were written together, or the first one is newer.
  out.state = (confirmed || (assigned && *assigned == "true") ||
               (!assigned && ack_assigned && *ack_assigned == "true"))
                  ? AssignmentState::kConfirmed
                  : AssignmentState::kAssumed;
  return out;
}

}  // namespace gpushare::memshare
