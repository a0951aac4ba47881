// The file reader: see node_config_internal.h.
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/duration.h"
#include "config/node_config_internal.h"
#include "core/inventory.h"
#include "core/resource_name.h"

namespace gpushare::node_config_internal {
namespace {

std::string Leaf(const std::string& path) {
  return path.substr(path.rfind('.') + 1);
}
std::string Parent(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// A devices list item as NVIDIA accepts it: GPU index, MIG index "i:j", GPU UUID, MIG UUID
// ("MIG-<uuid>" or "MIG-GPU-<uuid>/<gi>/<ci>").
bool IsDeviceRef(const std::string& s) {
  if (IsSmallNumber(s)) return true;
  size_t colon = s.find(':');
  if (colon != std::string::npos) {
    return IsSmallNumber(s.substr(0, colon)) && IsSmallNumber(s.substr(colon + 1));
  }
  return IsGpuUuid(s) || IsMigUuid(s);
}

class FileReader {
 public:
  FileReader(Problems* problems, std::vector<std::string>* notes) : p_(problems), notes_(notes) {}

  FileContents Read(const YAML::Node& doc) {
    if (!doc.IsDefined() || doc.IsNull()) return std::move(out_);
    MapReader top(doc, "", p_, {"version", "flags", "resources", "sharing", "imex", "gpushare"});
    if (!top.ok()) return std::move(out_);
    YAML::Node v = top.Get("version");
    if (v.IsDefined() && !(v.IsScalar() && (v.Scalar() == "v1" || v.Scalar().empty()))) {
      p_->Add("version", "must be v1 (or empty), got " + yaml::KindName(v), &v);
    }
    ReadFlags(top.Get("flags"));
    ReadResources(top.Get("resources"));
    ReadSharing(top.Get("sharing"));
    ReadImex(top.Get("imex"));
    ReadGpushare(top.Get("gpushare"));
    return std::move(out_);
  }

 private:
  // Keys of the settings that live directly in `section`.
  static std::vector<std::string> SettingKeys(const std::string& section) {
    std::vector<std::string> keys;
    for (const auto& s : Settings()) {
      if (Parent(s.row.file_path) == section) keys.push_back(Leaf(s.row.file_path));
    }
    return keys;
  }

  static std::vector<std::string> Plus(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Reads every setting of `section` from its MapReader into out_.settings.
  void ReadSettings(MapReader& m, const std::string& section) {
    for (const auto& s : Settings()) {
      if (Parent(s.row.file_path) != section) continue;
      const std::string key = Leaf(s.row.file_path);
      YAML::Node n = m.Get(key);
      if (!n.IsDefined()) continue;
      const std::string path = s.row.file_path;
      std::optional<std::string> text;
      switch (s.kind) {
        case Kind::kBool:
          if (auto b = yaml::ScalarBool(n))
            text = *b ? "true" : "false";
          else
            p_->Add(path, "must be true or false, got " + yaml::KindName(n), &n);
          break;
        case Kind::kInt:
          if (auto i = yaml::ScalarInt(n))
            text = std::to_string(*i);
          else
            p_->Add(path,
                    "must be an integer " + std::to_string(s.min) + ".." + std::to_string(s.max) +
                        ", got " + yaml::KindName(n),
                    &n);
          break;
        case Kind::kEnumList:
        case Kind::kIntList:
          text = ReadList(s, path, n);
          break;
        case Kind::kEnum:
        case Kind::kString:
        case Kind::kPath:
        case Kind::kDuration:
          if (n.IsScalar())
            text = n.Scalar();
          else
            p_->Add(path, "must be a string, got " + yaml::KindName(n), &n);
          break;
      }
      if (text) out_.settings[s.row.key] = {*text, path, n};
    }
  }

  std::optional<std::string> ReadList(const Setting& s, const std::string& path,
                                      const YAML::Node& n) {
    const bool ints = s.kind == Kind::kIntList;
    auto item_ok = [&](const YAML::Node& item) {
      return item.IsScalar() && (!ints || yaml::ScalarInt(item).has_value());
    };
    const std::string expect = ints ? "a list of integers" : "a string or a list of strings";
    if (n.IsScalar()) {
      if (!item_ok(n)) {
        p_->Add(path, "must be " + expect + ", got " + yaml::KindName(n), &n);
        return std::nullopt;
      }
      return n.Scalar();
    }
    if (!n.IsSequence()) {
      p_->Add(path, "must be " + expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    std::vector<std::string> items;
    bool ok = true;
    for (size_t i = 0; i < n.size(); ++i) {
      YAML::Node item = n[i];
      if (!item_ok(item) || item.Scalar().find(',') != std::string::npos) {
        p_->Add(path + "[" + std::to_string(i) + "]",
                std::string("must be ") + (ints ? "an integer" : "a string") + ", got " +
                    yaml::KindName(item),
                &item);
        ok = false;
        continue;
      }
      items.push_back(item.Scalar());
    }
    if (!ok) return std::nullopt;
    return Join(items, ",");
  }

  void ReadFlags(const YAML::Node& n) {
    MapReader m(n, "flags", p_, Plus(SettingKeys("flags"), {"useNodeFeatureAPI", "plugin", "gfd"}));
    if (!m.ok()) return;
    ReadSettings(m, "flags");
    if (auto b = m.Bool("useNodeFeatureAPI"); b && *b) {
      notes_->push_back(
          "flags.useNodeFeatureAPI: a gpu-feature-discovery setting; ignored by "
          "gpushare-node");
    }
    MapReader plugin(m.Get("plugin"), "flags.plugin", p_, SettingKeys("flags.plugin"));
    ReadSettings(plugin, "flags.plugin");
    MapReader gfd(m.Get("gfd"), "flags.gfd", p_,
                  {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"});
    if (gfd.ok()) {
      gfd.Bool("oneshot");
      gfd.Bool("noTimestamp");
      gfd.String("outputFile");
      gfd.String("machineTypeFile");
      if (auto d = gfd.String("sleepInterval"); d && !ParseDurationMs(*d)) {
        YAML::Node dn = gfd.Get("sleepInterval");
        p_->Add("flags.gfd.sleepInterval", "must be a duration like 60s or 5m, got \"" + *d + "\"",
                &dn);
      }
      notes_->push_back(
          "flags.gfd: gpu-feature-discovery settings are accepted and ignored by "
          "gpushare-node");
    }
  }

  void ReadResources(const YAML::Node& n) {
    MapReader m(n, "resources", p_, {"gpus", "mig"});
    if (!m.ok()) return;
    for (const char* kind : {"gpus", "mig"}) {
      YAML::Node list = m.Get(kind);
      const std::string path = std::string("resources.") + kind;
      if (!list.IsDefined()) continue;
      if (!list.IsSequence()) {
        p_->Add(path, "must be a list of {pattern, name}, got " + yaml::KindName(list), &list);
        continue;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        YAML::Node item = list[i];
        MapReader e(item, path + "[" + std::to_string(i) + "]", p_, {"pattern", "name"});
        if (!e.ok()) continue;
        if (!e.String("pattern")) p_->Add(e.PathOf("pattern"), "is required", &item);
        if (!e.String("name")) p_->Add(e.PathOf("name"), "is required", &item);
      }
    }
    notes_->push_back(
        "resources: custom resource naming is disabled, as in NVIDIA's plugin; the section is "
        "ignored (rename shared resources with sharing.timeSlicing.resources[].rename)");
  }

  void ReadSharing(const YAML::Node& n) {
    MapReader m(n, "sharing", p_, {"timeSlicing", "mps"});
    if (!m.ok()) return;
    YAML::Node mps = m.Get("mps");
    if (mps.IsDefined()) {
      p_->Add("sharing.mps",
              "MPS sharing is not supported by gpushare yet; use sharing.timeSlicing (with "
              "gpushare.timeSlicing.memoryLimit: evenSplit for per-replica memory limits "
              "enforced by gpushare's in-container library)",
              &mps);
    }
    YAML::Node tsn = m.Get("timeSlicing");
    MapReader ts(tsn, "sharing.timeSlicing", p_,
                 {"strategy", "renameByDefault", "failRequestsGreaterThanOne", "resources"});
    if (!ts.ok()) return;
    out_.has_time_slicing = true;
    if (auto s = ts.String("strategy"); s && !s->empty()) {
      YAML::Node sn = ts.Get("strategy");
      p_->Add("sharing.timeSlicing.strategy",
              "must be empty (the only strategy), got \"" + *s + "\"", &sn);
    }
    out_.rename_by_default = ts.Bool("renameByDefault").value_or(false);
    out_.fail_requests_greater_than_one = ts.Bool("failRequestsGreaterThanOne").value_or(false);
    YAML::Node list = ts.Get("resources");
    if (!list.IsDefined() || (list.IsSequence() && list.size() == 0)) {
      p_->Add("sharing.timeSlicing.resources", "at least one entry {name, replicas} is required",
              &tsn);
      return;
    }
    if (!list.IsSequence()) {
      p_->Add("sharing.timeSlicing.resources",
              "must be a list of {name, rename, devices, replicas}, got " + yaml::KindName(list),
              &list);
      return;
    }
    for (size_t i = 0; i < list.size(); ++i) ReadEntry(list[i], i);
  }

  void ReadEntry(const YAML::Node& n, size_t i) {
    const std::string path = "sharing.timeSlicing.resources[" + std::to_string(i) + "]";
    MapReader m(n, path, p_, {"name", "rename", "devices", "replicas"});
    if (!m.ok()) {
      if (!n.IsDefined() || n.IsNull()) p_->Add(path, "must be a mapping {name, replicas}", &n);
      return;
    }
    RawEntry e;
    e.resource.field_path = path;
    e.name_node = m.Get("name");
    if (auto name = m.String("name")) {
      std::string full = name->find('/') == std::string::npos ? "nvidia.com/" + *name : *name;
      std::string why = SharedNameProblem(full);
      if (!why.empty()) {
        p_->Add(path + ".name", why + ", got \"" + *name + "\"", &e.name_node);
      }
      e.resource.name = full;
    } else if (!e.name_node.IsDefined()) {
      p_->Add(path + ".name", "is required (nvidia.com/gpu or nvidia.com/mig-<profile>)", &n);
    }
    if (auto rename = m.String("rename"); rename && !rename->empty()) {
      std::string full = rename->find('/') == std::string::npos ? "nvidia.com/" + *rename : *rename;
      std::string why = ExtendedResourceNameProblem(full);
      YAML::Node rn = m.Get("rename");
      if (!why.empty()) {
        p_->Add(path + ".rename", full + " is not a valid extended resource name: " + why, &rn);
      }
      e.resource.rename = full;
    }
    ReadDevices(m.Get("devices"), path + ".devices", &e.resource.devices);
    e.replicas_node = m.Get("replicas");
    if (!e.replicas_node.IsDefined()) {
      p_->Add(path + ".replicas", "is required (an integer, at least 2)", &n);
    } else if (auto r = yaml::ScalarInt(e.replicas_node)) {
      e.replicas = *r;
    } else {
      p_->Add(path + ".replicas", "must be an integer, got " + yaml::KindName(e.replicas_node),
              &e.replicas_node);
    }
    out_.entries.push_back(std::move(e));
  }

  // The names a sharing entry may replicate.
  static std::string SharedNameProblem(const std::string& name) {
    if (name == "nvidia.com/gpu") return "";
    const std::string mig = "nvidia.com/mig-";
    if (name.rfind(mig, 0) == 0) {
      std::string profile = name.substr(mig.size());
      size_t gb = profile.find("gb");
      if (gb != std::string::npos) {
        for (size_t k = gb; k < profile.size(); ++k) {
          if (profile[k] == '.') profile[k] = '+';
        }
      }
      auto slices = ParseMigProfile(profile);
      if (slices && slices->compute_slices == slices->gpu_slices &&
          ExtendedResourceNameProblem(name).empty()) {
        return "";
      }
      if (slices) {
        return "compute-instance sub-profiles are never advertised; use the GPU-instance "
               "profile, e.g. nvidia.com/mig-" +
               std::to_string(slices->gpu_slices) + "g." + std::to_string(slices->memory_gb) + "gb";
      }
    }
    return "must be nvidia.com/gpu or nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb)";
  }

  // How a `devices` selector of one section is read.
  struct SelectorRules {
    std::string expect;         // "must be ..." for a scalar or another kind of node
    std::string count_problem;  // "a count of devices must be > 0"
    bool none_allowed = false;  // "none" and [] select nothing
    std::string empty_problem;  // for [] when !none_allowed
    std::function<std::string(const YAML::Node& item)> item_problem;  // "" = fine
  };

  // "all", a positive count or a list. nullopt: nothing selected, or a problem (recorded).
  std::optional<DeviceSelector> ReadSelector(const YAML::Node& n, const std::string& path,
                                             const SelectorRules& r) {
    DeviceSelector out;
    if (n.IsScalar()) {
      if (!yaml::IsQuoted(n) && yaml::ScalarInt(n)) {
        int64_t c = *yaml::ScalarInt(n);
        if (c <= 0) {
          p_->Add(path,
                  r.count_problem + ", got " + n.Scalar() +
                      (r.none_allowed ? " (use none for no GPU)" : ""),
                  &n);
          return std::nullopt;
        }
        out.kind = DeviceSelector::Kind::kCount;
        out.count = static_cast<int>(std::min<int64_t>(c, 1 << 20));
        return out;
      }
      if (n.Scalar() == "all") return out;
      if (r.none_allowed && n.Scalar() == "none") return std::nullopt;
      p_->Add(path, r.expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    if (!n.IsSequence()) {
      p_->Add(path, r.expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    if (n.size() == 0) {
      if (!r.none_allowed) p_->Add(path, r.empty_problem, &n);
      return std::nullopt;
    }
    out.kind = DeviceSelector::Kind::kList;
    for (size_t i = 0; i < n.size(); ++i) {
      YAML::Node item = n[i];
      std::string why = r.item_problem(item);
      if (!why.empty()) {
        p_->Add(path + "[" + std::to_string(i) + "]", why + ", got " + yaml::KindName(item), &item);
        continue;
      }
      out.items.push_back(item.Scalar());
    }
    return out;
  }

  void ReadDevices(const YAML::Node& n, const std::string& path, DeviceSelector* out) {
    if (!n.IsDefined()) return;  // default: all
    SelectorRules r;
    r.expect =
        "must be \"all\", a positive count, or a list of GPU indices (0), MIG indices (0:1), "
        "GPU UUIDs (GPU-...) or MIG UUIDs (MIG-...)";
    r.count_problem = "a count of devices must be > 0";
    r.empty_problem = "an empty list selects nothing; omit devices (= all) or list devices";
    r.item_problem = [](const YAML::Node& item) -> std::string {
      if (item.IsScalar() && IsDeviceRef(item.Scalar())) return "";
      return "must be a GPU index (0), a MIG index (0:1), a GPU UUID (GPU-...) or a MIG UUID "
             "(MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>)";
    };
    if (auto sel = ReadSelector(n, path, r)) *out = *sel;
  }

  void ReadImex(const YAML::Node& n) {
    MapReader m(n, "imex", p_, {"channelIDs", "required"});
    if (!m.ok()) return;
    out_.imex.required = m.Bool("required").value_or(false);
    YAML::Node ids = m.Get("channelIDs");
    if (!ids.IsDefined()) return;
    bool ok = ids.IsSequence() && ids.size() <= 1;
    if (ok && ids.size() == 1) ok = yaml::ScalarInt(ids[0]) == 0;
    if (!ok) {
      p_->Add("imex.channelIDs", "must be [] or [0], got " + yaml::KindName(ids), &ids);
      return;
    }
    if (ids.size() == 1) out_.imex.channel_ids.push_back(0);
  }

  void ReadGpushare(const YAML::Node& n) {
    MapReader m(n, "gpushare", p_,
                Plus(SettingKeys("gpushare"),
                     {"timeSlicing", "health", "interposer", "memoryShares", "metrics"}));
    if (!m.ok()) return;
    ReadSettings(m, "gpushare");
    for (const char* section : {"timeSlicing", "health", "interposer", "metrics"}) {
      const std::string path = std::string("gpushare.") + section;
      MapReader sub(m.Get(section), path, p_, SettingKeys(path));
      ReadSettings(sub, path);
    }
    ReadMemoryShares(m.Get("memoryShares"));
  }

  void ReadMemoryShares(const YAML::Node& n) {
    const std::string path = "gpushare.memoryShares";
    MapReader m(n, path, p_, Plus(SettingKeys(path), {"devices"}));
    if (!m.ok()) return;
    ReadSettings(m, path);
    YAML::Node d = m.Get("devices");
    out_.memory_devices_node = d;
    if (!d.IsDefined()) {
      notes_->push_back(
          path + ".devices is not set: no GPU serves memory shares (set all, a count or a list)");
      return;
    }
    SelectorRules r;
    r.expect =
        "must be \"all\", \"none\", a positive count, or a list of GPU indices (0) or GPU UUIDs "
        "(GPU-...)";
    r.count_problem = "a count of GPUs must be > 0";
    r.none_allowed = true;
    r.item_problem = [](const YAML::Node& item) -> std::string {
      if (item.IsScalar() && (IsSmallNumber(item.Scalar()) || IsGpuUuid(item.Scalar()))) return "";
      if (item.IsScalar() && IsDeviceRef(item.Scalar())) {
        return "memory shares need whole GPUs; a MIG device cannot serve them";
      }
      return "must be a GPU index (0) or a GPU UUID (GPU-...)";
    };
    out_.memory_devices = ReadSelector(d, path + ".devices", r);
  }

  Problems* p_;
  std::vector<std::string>* notes_;
  FileContents out_;
};

}  // namespace

FileContents ReadConfigDocument(const YAML::Node& doc, Problems* problems,
                                std::vector<std::string>* notes) {
  return FileReader(problems, notes).Read(doc);
}

}  // namespace gpushare::node_config_internal
