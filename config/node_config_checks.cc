// The checks across entries: see node_config_internal.h.
#include <set>
#include <string>

#include "config/node_config_internal.h"
#include "core/inventory.h"
#include "core/resource_name.h"

namespace gpushare::node_config_internal {

// Checks each sharing entry now that the ceiling and the MIG strategy are final.
void CheckEntries(const NodeConfig& c, FileContents& file, Problems* problems) {
  const int ceiling = c.gpushare.max_clients_per_gpu;
  for (auto& e : file.entries) {
    const std::string& path = e.resource.field_path;
    if (e.replicas) {
      if (*e.replicas < 2 || *e.replicas > ceiling) {
        problems->Add(
            path + ".replicas",
            "must be 2.." + std::to_string(ceiling) + ", got " + std::to_string(*e.replicas) +
                (*e.replicas > ceiling ? " (the ceiling is gpushare.maxClientsPerGpu)" : ""),
            &e.replicas_node);
      } else {
        e.resource.replicas = static_cast<int>(*e.replicas);
      }
    }
    if (e.resource.name.rfind("nvidia.com/mig-", 0) == 0 && c.mig_strategy != MigStrategy::kMixed) {
      problems->Add(path + ".name",
                    e.resource.name + " exists only with flags.migStrategy mixed, got " +
                        kMigStrategies[static_cast<int>(c.mig_strategy)],
                    &e.name_node);
    }
    if (e.resource.rename.empty() && file.rename_by_default && !e.resource.name.empty()) {
      std::string why = ExtendedResourceNameProblem(e.resource.name + ".shared");
      if (!why.empty()) {
        problems->Add("sharing.timeSlicing.renameByDefault",
                      e.resource.name + ".shared is not a valid extended resource name: " + why);
      }
    }
  }
}

// Two entries for one resource where one takes every device overlap on any node. One line
// per entry that overlaps earlier ones, naming the first of them and counting the others
// (pair by pair, 1,000 entries gave 499,500 lines); linear in the entries.
void CheckOverlaps(const FileContents& file, Problems* problems) {
  struct Group {
    size_t entries = 0, all = 0;  // entries of this name so far, and those that take every device
    const RawEntry* first = nullptr;
    const RawEntry* first_all = nullptr;
  };
  std::map<std::string, Group> groups;
  for (const auto& e : file.entries) {
    const auto& r = e.resource;
    if (r.name.empty()) continue;
    Group& g = groups[r.name];
    const bool all = r.devices.kind == DeviceSelector::Kind::kAll;
    const size_t overlapped = all ? g.entries : g.all;
    if (overlapped > 0) {
      const RawEntry* first = all ? g.first : g.first_all;
      std::string others;
      if (overlapped == 2) others = " (and 1 more entry)";
      if (overlapped > 2) others = " (and " + std::to_string(overlapped - 1) + " more entries)";
      problems->Add(r.field_path + ".devices",
                    "overlaps " + first->resource.field_path + others +
                        ", which shares the same resource " + r.name +
                        " (one of them selects all devices); give both explicit devices lists");
    }
    if (g.entries++ == 0) g.first = &e;
    if (all && g.all++ == 0) g.first_all = &e;
  }
}

// A GPU serves one kind of share: memory shares and a time-slicing entry of nvidia.com/gpu
// overlap on every node when either side takes all GPUs.
void CheckMemorySharesOverlap(const FileContents& file, Problems* problems) {
  if (!file.memory_devices) return;
  for (const auto& e : file.entries) {
    const auto& r = e.resource;
    if (r.name != "nvidia.com/gpu") continue;
    if (r.devices.kind == DeviceSelector::Kind::kAll ||
        file.memory_devices->kind == DeviceSelector::Kind::kAll) {
      problems->Add(
          "gpushare.memoryShares.devices",
          "overlaps " + r.field_path +
              ", which time-slices nvidia.com/gpu (one of them selects "
              "all GPUs); a GPU serves one kind of share: give both explicit devices lists",
          file.memory_devices_node.IsDefined() ? &file.memory_devices_node : nullptr);
    }
  }
}

}  // namespace gpushare::node_config_internal
