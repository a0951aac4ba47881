#include "node/plan_printer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/memshare.h"
#include "core/memshare_node.h"

namespace gpushare::node {

const char* MigStrategyName(MigStrategy s) {
  switch (s) {
    case MigStrategy::kNone:
      return "none";
    case MigStrategy::kSingle:
      return "single";
    case MigStrategy::kMixed:
      return "mixed";
  }
  return "none";
}

namespace {

using nlohmann::json;

std::vector<std::string> DeviceListNames(const DeviceListStrategy& d) {
  std::vector<std::string> v;
  if (d.envvar) v.push_back("envvar");
  if (d.volume_mounts) v.push_back("volume-mounts");
  if (d.cdi_annotations) v.push_back("cdi-annotations");
  if (d.cdi_cri) v.push_back("cdi-cri");
  return v;
}

json InventoryJson(const Inventory& inv) {
  json gpus = json::array();
  for (const auto& g : inv.gpus) {
    json mig = json::array();
    for (const auto& m : g.mig) {
      mig.push_back({{"index", m.index},
                     {"profile", m.profile},
                     {"gpuInstanceId", m.gpu_instance_id},
                     {"computeInstanceId", m.compute_instance_id},
                     {"uuid", m.uuid},
                     {"memoryMiB", m.memory_mib},
                     {"multiprocessors", m.multiprocessors}});
    }
    gpus.push_back(
        {{"index", g.index},
         {"uuid", g.uuid},
         {"product", g.product},
         {"memoryMiB", g.memory_mib},
         {"computeCapability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
         {"numaNode", g.numa_node},
         {"pciBusId", g.pci_bus_id},
         {"multiprocessors", g.multiprocessors},
         {"migEnabled", g.mig_enabled},
         {"mig", mig}});
  }
  return {{"source", inv.source},
          {"driverVersion", inv.driver_version},
          {"cudaDriverVersion", inv.cuda_driver_version},
          {"gpus", gpus}};
}

json ResourceJson(const PlannedResource& r) {
  json devices = json::array();
  size_t healthy = 0;
  for (const auto& d : r.devices) {
    if (d.healthy) ++healthy;
    json dj = {{"id", d.id},
               {"health", d.healthy ? "Healthy" : "Unhealthy"},
               {"numaNodes", d.numa_nodes},
               {"gpuIndex", d.gpu_index},
               {"gpuUuid", d.gpu_uuid},
               {"mig", d.is_mig},
               {"deviceUuid", d.device_uuid},
               {"deviceIndex", d.device_index},
               {"memoryMiB", d.memory_mib},
               {"memoryLimitMiB", d.memory_limit_mib},
               {"smSharePpm", d.sm_share_ppm}};
    if (d.is_mig) dj["migIndex"] = d.mig_index;
    if (d.replica >= 0) dj["replica"] = d.replica;
    devices.push_back(std::move(dj));
  }
  return {{"name", r.name},
          {"socket", r.socket_name},
          {"baseName", r.base_name},
          {"source", r.source_field},
          {"replicas", r.replicas},
          {"failRequestsGreaterThanOne", r.fail_requests_greater_than_one},
          {"count", r.devices.size()},
          {"healthy", healthy},
          {"devices", devices}};
}

// "0-3,6" for a set of GPU indices; "2:0-6" style for MIG devices of one GPU.
std::string Ranges(const std::vector<int>& sorted) {
  std::string s;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(sorted[i]);
    if (j > i) s += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return s;
}

std::string WhereTheDevicesAre(const PlannedResource& r) {
  std::set<int> whole;
  std::map<int, std::set<int>> mig;
  for (const auto& d : r.devices) {
    if (d.is_mig)
      mig[d.gpu_index].insert(d.mig_index);
    else
      whole.insert(d.gpu_index);
  }
  std::string s;
  if (!whole.empty()) s = "GPU " + Ranges({whole.begin(), whole.end()});
  for (const auto& [g, ms] : mig) {
    if (!s.empty()) s += "; ";
    s += "MIG " + std::to_string(g) + ":" + Ranges({ms.begin(), ms.end()});
  }
  return s;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string FormatTable(const PlanPrintInput& in, const std::vector<std::string>& notes) {
  const Inventory& inv = *in.inventory;
  std::ostringstream os;
  os << "inventory: " << (inv.source.empty() ? "?" : inv.source) << " (" << inv.gpus.size()
     << " GPU" << (inv.gpus.size() == 1 ? "" : "s");
  if (!inv.driver_version.empty()) os << ", driver " << inv.driver_version;
  if (!inv.cuda_driver_version.empty()) os << ", CUDA " << inv.cuda_driver_version;
  os << ")\n";
  os << "config: " << (in.config_path.empty() ? "defaults" : in.config_path) << " (migStrategy "
     << MigStrategyName(in.config->mig_strategy) << ", maxClientsPerGpu "
     << in.config->gpushare.max_clients_per_gpu << ")\n\n";
  std::vector<std::vector<std::string>> gpus = {
      {"GPU", "UUID", "PRODUCT", "MEMORY", "CC", "NUMA", "MIG"}};
  for (const auto& g : inv.gpus) {
    std::string mig = "-";
    if (g.mig_enabled) {
      std::map<std::string, int> profiles;
      for (const auto& m : g.mig) ++profiles[m.profile];
      mig = "enabled";
      std::string list;
      for (const auto& [p, n] : profiles)
        list += (list.empty() ? "" : ", ") + std::to_string(n) + "x " + p;
      if (!list.empty()) mig += ": " + list;
    }
    gpus.push_back({std::to_string(g.index), g.uuid, g.product,
                    std::to_string(g.memory_mib) + " MiB",
                    std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor),
                    g.numa_node >= 0 ? std::to_string(g.numa_node) : "-", mig});
  }
  os << Table(gpus) << "\n";
  std::vector<std::vector<std::string>> res = {
      {"RESOURCE", "DEVICES", "HEALTHY", "REPLICAS", "LIMIT/DEVICE", "SOCKET", "ON"}};
  size_t total = 0;
  for (const auto& r : in.plan->resources) {
    size_t healthy = std::count_if(r.devices.begin(), r.devices.end(),
                                   [](const PlannedDevice& d) { return d.healthy; });
    std::set<uint64_t> limits;
    for (const auto& d : r.devices) limits.insert(d.memory_limit_mib);
    std::string limit = "-";
    if (!(limits.size() == 1 && *limits.begin() == 0)) {
      limit.clear();
      for (uint64_t l : limits) limit += (limit.empty() ? "" : ",") + std::to_string(l) + " MiB";
    }
    res.push_back({r.name, std::to_string(r.devices.size()), std::to_string(healthy),
                   r.replicas > 1 ? std::to_string(r.replicas) : "-", limit, r.socket_name,
                   WhereTheDevicesAre(r)});
    total += r.devices.size();
  }
  os << Table(res);
  os << "\n"
     << in.plan->resources.size() << " resource" << (in.plan->resources.size() == 1 ? "" : "s")
     << ", " << total << " devices\n";
  for (const auto& n : notes) os << "note: " << n << "\n";
  return os.str();
}

// The Node object as the API shows it once this plan is published (see the header).
std::string FormatNode(const PlanPrintInput& in) {
  const memshare::NodeInventory inv =
      memshare::BuildNodeInventory(*in.inventory, *in.config, *in.plan);
  json capacity = json::object(), allocatable = json::object();
  for (const PlannedResource& r : in.plan->resources) {
    int64_t healthy = 0;
    for (const PlannedDevice& d : r.devices) healthy += d.healthy ? 1 : 0;
    capacity[r.name] = std::to_string(r.devices.size());
    allocatable[r.name] = std::to_string(healthy);
  }
  if (memshare::FindMemoryResource(*in.plan) != nullptr &&
      in.config->gpushare.memory_shares.publish_gpu_count) {
    const memshare::GpuCount count = memshare::CountMemoryGpus(inv);
    capacity[std::string(memshare::kGpuCountResource)] = std::to_string(count.capacity);
    allocatable[std::string(memshare::kGpuCountResource)] = std::to_string(count.allocatable);
  }
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", in.node_name},
        {"annotations",
         {{std::string(memshare::kInventoryAnnotation), memshare::EncodeInventory(inv)}}}}},
      {"status", {{"capacity", capacity}, {"allocatable", allocatable}}}};
  return node.dump(2) + "\n";
}

}  // namespace

std::string FormatPlan(const PlanPrintInput& in, PlanFormat format) {
  std::vector<std::string> notes = in.notes;
  notes.insert(notes.end(), in.plan->notes.begin(), in.plan->notes.end());
  if (format == PlanFormat::kTable) return FormatTable(in, notes);
  if (format == PlanFormat::kNode) return FormatNode(in);
  const NodeConfig& c = *in.config;
  json resources = json::array();
  for (const auto& r : in.plan->resources) resources.push_back(ResourceJson(r));
  json out = {{"inventory", InventoryJson(*in.inventory)},
              {"config",
               {{"path", in.config_path},
                {"migStrategy", MigStrategyName(c.mig_strategy)},
                {"deviceIDStrategy",
                 c.plugin.device_id_strategy == DeviceIdStrategy::kUuid ? "uuid" : "index"},
                {"deviceListStrategy", DeviceListNames(c.plugin.device_list_strategy)},
                {"maxClientsPerGpu", c.gpushare.max_clients_per_gpu},
                {"renameByDefault", c.time_slicing.rename_by_default},
                {"failRequestsGreaterThanOne", c.time_slicing.fail_requests_greater_than_one}}},
              {"resources", resources},
              {"notes", notes}};
  return out.dump(2) + "\n";
}

}  // namespace gpushare::node
