#include "gpu/file_inventory.h"

#include <algorithm>
#include <map>
#include <set>

#include "config/file_read.h"
#include "config/yaml_reader.h"

namespace gpushare {

namespace {

using yaml::MapReader;
using yaml::Problems;

constexpr int kMaxGpuSlices = 7;  // compute slices of every MIG-capable GPU so far

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "0000:17:00.0" (sysfs form) or "00000000:17:00.0" (NVML form).
bool IsPciBusId(const std::string& s) {
  size_t colon = s.find(':');
  if (colon != 4 && colon != 8) return false;
  std::string rest = s.substr(colon + 1);
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.') return false;
  for (size_t i = 0; i < colon; ++i) {
    if (!IsHexDigit(s[i])) return false;
  }
  return IsHexDigit(rest[0]) && IsHexDigit(rest[1]) && IsHexDigit(rest[3]) && IsHexDigit(rest[4]) &&
         rest[6] >= '0' && rest[6] <= '7';
}

// "8.6" -> (8, 6). YAML reads a plain 8.6 as a float scalar; its text is what we parse.
bool ParseComputeCapability(const std::string& s, int* major, int* minor) {
  size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= s.size() || dot > 2 ||
      s.size() - dot - 1 > 2) {
    return false;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (i != dot && (s[i] < '0' || s[i] > '9')) return false;
  }
  *major = std::stoi(s.substr(0, dot));
  *minor = std::stoi(s.substr(dot + 1));
  return *major > 0;
}

class InventoryReader {
 public:
  explicit InventoryReader(Problems* p) : p_(p) {}

  Inventory Read(const YAML::Node& doc) {
    Inventory inv;
    if (!doc.IsDefined()) return inv;
    if (doc.IsNull()) {
      p_->Add("gpus", "is required (a list of GPUs; [] for a node without GPUs)");
      return inv;
    }
    MapReader top(doc, "", p_, {"version", "driverVersion", "cudaDriverVersion", "gpus"});
    if (!top.ok()) return inv;
    if (auto v = top.String("version"); v && *v != "v1") {
      YAML::Node vn = top.Get("version");
      p_->Add("version", "must be v1, got \"" + *v + "\"", &vn);
    }
    inv.driver_version = top.String("driverVersion").value_or("");
    inv.cuda_driver_version = top.String("cudaDriverVersion").value_or("");
    YAML::Node gpus = top.Get("gpus");
    if (!gpus.IsDefined()) {
      p_->Add("gpus", "is required (a list of GPUs; [] for a node without GPUs)", &doc);
      return inv;
    }
    if (!gpus.IsSequence()) {
      p_->Add("gpus", "must be a list of GPUs, got " + yaml::KindName(gpus), &gpus);
      return inv;
    }
    for (size_t i = 0; i < gpus.size(); ++i) {
      YAML::Node g = gpus[i];
      Gpu gpu;
      const std::string path = "gpus[" + std::to_string(i) + "]";
      if (ReadGpu(g, path, &gpu)) {
        inv.gpus.push_back(std::move(gpu));
        paths_.push_back(path);
      }
    }
    CrossCheck(inv);
    std::sort(inv.gpus.begin(), inv.gpus.end(),
              [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
    return inv;
  }

 private:
  template <typename T>
  void Required(MapReader& m, const std::string& key, const std::optional<T>& v,
                const YAML::Node& parent, const std::string& what) {
    if (!v && !m.Get(key).IsDefined())
      p_->Add(m.PathOf(key), "is required (" + what + ")", &parent);
  }

  // The required "uuid" field: "<kind>-<8-4-4-4-12 hex digits>" as `valid` checks it, or "" with
  // the problem reported.
  std::string Uuid(MapReader& m, const YAML::Node& n, const std::string& path,
                   const std::string& kind, bool (*valid)(const std::string&)) {
    const std::string form = kind + "-<8-4-4-4-12 hex digits>";
    auto uuid = m.String("uuid");
    Required(m, "uuid", uuid, n, form);
    if (uuid && !valid(*uuid)) {
      YAML::Node un = m.Get("uuid");
      p_->Add(path + ".uuid", "must be " + form + ", got \"" + *uuid + "\"", &un);
    }
    return uuid.value_or("");
  }

  bool ReadGpu(const YAML::Node& n, const std::string& path, Gpu* g) {
    MapReader m(n, path, p_,
                {"index", "uuid", "product", "memoryMiB", "computeCapability", "numaNode",
                 "pciBusId", "multiprocessors", "migEnabled", "mig"});
    if (!m.ok()) {
      if (!n.IsDefined() || n.IsNull()) p_->Add(path, "must be a mapping describing a GPU", &n);
      return false;
    }
    auto index = m.Int("index", 0, 1023);
    Required(m, "index", index, n, "the NVML index, 0..1023");
    g->index = static_cast<int>(index.value_or(-1));

    g->uuid = Uuid(m, n, path, "GPU", IsGpuUuid);

    auto product = m.String("product");
    Required(m, "product", product, n, "the product name, e.g. NVIDIA A10");
    if (product && product->empty()) p_->Add(path + ".product", "must not be empty");
    g->product = product.value_or("");

    auto mem = m.Int("memoryMiB", 1, 16 * 1024 * 1024);
    Required(m, "memoryMiB", mem, n, "total memory in MiB, e.g. 23028");
    g->memory_mib = static_cast<uint64_t>(mem.value_or(0));

    YAML::Node ccn = m.Get("computeCapability");
    if (!ccn.IsDefined()) {
      p_->Add(path + ".computeCapability", "is required (major.minor, e.g. \"8.6\")", &n);
    } else if (!ccn.IsScalar() ||
               !ParseComputeCapability(ccn.Scalar(), &g->cc_major, &g->cc_minor)) {
      p_->Add(path + ".computeCapability",
              "must be major.minor, e.g. \"8.6\", got " + yaml::KindName(ccn), &ccn);
    }

    g->numa_node = static_cast<int>(m.Int("numaNode", -1, 1023).value_or(-1));
    if (auto pci = m.String("pciBusId")) {
      if (!IsPciBusId(*pci)) {
        YAML::Node pn = m.Get("pciBusId");
        p_->Add(path + ".pciBusId", "must be a PCI bus ID like 0000:17:00.0, got \"" + *pci + "\"",
                &pn);
      }
      g->pci_bus_id = *pci;
    }
    g->multiprocessors = static_cast<int>(m.Int("multiprocessors", 0, 100000).value_or(0));
    g->mig_enabled = m.Bool("migEnabled").value_or(false);

    YAML::Node mig = m.Get("mig");
    if (mig.IsDefined()) {
      if (!g->mig_enabled) {
        p_->Add(path + ".mig", "MIG devices are listed but migEnabled is not true", &mig);
      } else if (!mig.IsSequence()) {
        p_->Add(path + ".mig", "must be a list of MIG devices, got " + yaml::KindName(mig), &mig);
      } else {
        for (size_t j = 0; j < mig.size(); ++j) {
          MigInstance mi;
          mi.index = static_cast<int>(j);
          YAML::Node mn = mig[j];
          if (ReadMig(mn, path + ".mig[" + std::to_string(j) + "]", &mi)) g->mig.push_back(mi);
        }
        CheckMigLayout(*g, path);
      }
    }
    return true;
  }

  bool ReadMig(const YAML::Node& n, const std::string& path, MigInstance* mi) {
    MapReader m(n, path, p_,
                {"index", "profile", "gpuInstanceId", "computeInstanceId", "uuid", "memoryMiB",
                 "multiprocessors"});
    if (!m.ok()) {
      if (!n.IsDefined() || n.IsNull())
        p_->Add(path, "must be a mapping describing a MIG device", &n);
      return false;
    }
    if (auto idx = m.Int("index", 0, 63)) mi->index = static_cast<int>(*idx);
    auto profile = m.String("profile");
    Required(m, "profile", profile, n, "e.g. 1g.10gb");
    if (profile && !ParseMigProfile(*profile)) {
      YAML::Node pn = m.Get("profile");
      p_->Add(
          path + ".profile",
          "must be a MIG profile like 1g.10gb, 1c.2g.20gb or 1g.10gb+me, got \"" + *profile + "\"",
          &pn);
    }
    mi->profile = profile.value_or("");
    auto gi = m.Int("gpuInstanceId", 0, 1023);
    Required(m, "gpuInstanceId", gi, n, "the GI ID, e.g. 7");
    mi->gpu_instance_id = static_cast<int>(gi.value_or(-1));
    auto ci = m.Int("computeInstanceId", 0, 1023);
    Required(m, "computeInstanceId", ci, n, "the CI ID, e.g. 0");
    mi->compute_instance_id = static_cast<int>(ci.value_or(-1));
    mi->uuid = Uuid(m, n, path, "MIG", IsMigUuid);
    auto mem = m.Int("memoryMiB", 1, 16 * 1024 * 1024);
    Required(m, "memoryMiB", mem, n, "memory of the instance in MiB, e.g. 9856");
    mi->memory_mib = static_cast<uint64_t>(mem.value_or(0));
    mi->multiprocessors = static_cast<int>(m.Int("multiprocessors", 0, 100000).value_or(0));
    return true;
  }

  // GI/CI pairs unique; instances of one GI agree on its slices; the GPU's slices and memory
  // are not exceeded.
  void CheckMigLayout(Gpu& g, const std::string& path) {
    std::map<std::pair<int, int>, int> pairs;
    std::map<int, std::pair<int, uint64_t>> gis;  // GI -> (gpu slices, memory)
    std::set<int> indices;
    for (size_t j = 0; j < g.mig.size(); ++j) {
      const auto& m = g.mig[j];
      const std::string mp = path + ".mig[" + std::to_string(j) + "]";
      if (!indices.insert(m.index).second) {
        p_->Add(mp + ".index", "duplicate MIG index " + std::to_string(m.index));
      }
      auto [it, fresh] = pairs.emplace(std::make_pair(m.gpu_instance_id, m.compute_instance_id),
                                       static_cast<int>(j));
      if (!fresh && m.gpu_instance_id >= 0) {
        p_->Add(mp, "gpuInstanceId " + std::to_string(m.gpu_instance_id) + " / computeInstanceId " +
                        std::to_string(m.compute_instance_id) + " is also used by " + path +
                        ".mig[" + std::to_string(it->second) + "]");
      }
      if (m.memory_mib > g.memory_mib && g.memory_mib > 0) {
        p_->Add(mp + ".memoryMiB", std::to_string(m.memory_mib) + " is more than the GPU's " +
                                       std::to_string(g.memory_mib));
      }
      auto slices = ParseMigProfile(m.profile);
      if (!slices || m.gpu_instance_id < 0) continue;
      auto [git, gfresh] =
          gis.emplace(m.gpu_instance_id, std::make_pair(slices->gpu_slices, m.memory_mib));
      if (!gfresh && git->second.first != slices->gpu_slices) {
        p_->Add(mp + ".profile", m.profile + " does not match the other devices of GPU instance " +
                                     std::to_string(m.gpu_instance_id));
      }
    }
    int total = 0;
    uint64_t mem = 0;
    for (const auto& [gi, v] : gis) {
      total += v.first;
      mem += v.second;
    }
    if (total > kMaxGpuSlices) {
      p_->Add(path + ".mig", "the GPU instances use " + std::to_string(total) +
                                 " GPU slices; a GPU has at most " + std::to_string(kMaxGpuSlices));
    }
    if (g.memory_mib > 0 && mem > g.memory_mib) {
      p_->Add(path + ".mig", "the GPU instances have " + std::to_string(mem) +
                                 " MiB in all, more than the GPU's " +
                                 std::to_string(g.memory_mib));
    }
    std::sort(g.mig.begin(), g.mig.end(),
              [](const MigInstance& a, const MigInstance& b) { return a.index < b.index; });
  }

  void CrossCheck(const Inventory& inv) {
    std::map<int, size_t> indices;
    std::map<std::string, std::string> uuids;  // uuid -> path of its first use
    for (size_t i = 0; i < inv.gpus.size(); ++i) {
      const Gpu& g = inv.gpus[i];
      const std::string& path = paths_[i];
      if (g.index >= 0) {
        auto [it, fresh] = indices.emplace(g.index, i);
        if (!fresh) {
          p_->Add(path + ".index", "duplicate of " + paths_[it->second] + ".index (" +
                                       std::to_string(g.index) + ")");
        }
      }
      auto add_uuid = [&](const std::string& uuid, const std::string& field) {
        if (uuid.empty()) return;
        auto [it, fresh] = uuids.emplace(uuid, field);
        if (!fresh) p_->Add(field, "duplicate of " + it->second + " (" + uuid + ")");
      };
      add_uuid(g.uuid, path + ".uuid");
      for (size_t j = 0; j < g.mig.size(); ++j) {
        add_uuid(g.mig[j].uuid, path + ".mig[" + std::to_string(j) + "].uuid");
      }
    }
  }

  Problems* p_;
  std::vector<std::string> paths_;  // the field path of each GPU read, parallel to Inventory::gpus
};

}  // namespace

Result<Inventory> ParseInventoryYaml(const std::string& text, const std::string& source_name) {
  if (static_cast<int64_t>(text.size()) > kMaxInventoryFileBytes) {
    return Status::InvalidArgument(
        "cannot read inventory file " + source_name + ": " +
        OverLimit(static_cast<int64_t>(text.size()), kMaxInventoryFileBytes));
  }
  Problems problems(source_name);
  YAML::Node doc = yaml::ParseDocument(text, &problems);
  Inventory inv;
  {
    InventoryReader reader(&problems);
    inv = reader.Read(doc);
  }
  if (!problems.empty()) return Status::InvalidArgument(problems.Joined());
  inv.source = source_name;
  return inv;
}

Result<Inventory> LoadInventoryFile(const std::string& path) {
  auto text = ReadInputFile(path, {"inventory file", kMaxInventoryFileBytes, "inventory.yaml"});
  if (!text.ok()) return Status::InvalidArgument("--inventory: " + text.status().message());
  return ParseInventoryYaml(*text, path);
}

namespace {

class FileInventorySource : public InventorySource {
 public:
  explicit FileInventorySource(std::string path) : path_(std::move(path)) {}
  Result<Inventory> Load() override { return LoadInventoryFile(path_); }
  std::string Describe() const override { return "inventory file " + path_; }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<InventorySource> MakeFileInventorySource(std::string path) {
  return std::make_unique<FileInventorySource>(std::move(path));
}

}  // namespace gpushare
