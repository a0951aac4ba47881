#include "deviceplugin/allocation.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "base/strings.h"

namespace gpushare::deviceplugin {
namespace {

std::string JoinIds(const std::vector<std::string>& ids) {
  return JoinLimited(ids, 8);
}

bool IsCharDevice(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  // Tests stand in for device nodes with plain files; accept both.
  return S_ISCHR(st.st_mode) || S_ISREG(st.st_mode);
}

std::string HostPath(const std::string& dev_root, const std::string& container_path) {
  if (dev_root.empty() || dev_root == "/") return container_path;
  std::string root = dev_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + container_path;
}

// The part of an annotation key after the prefix: letters, digits, '_', '-', '.', alphanumeric at
// both ends, at most 63 characters.
std::string AnnotationKeyName(const std::string& resource_name) {
  std::string s = "gpushare_";
  for (char c : resource_name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_';
    s += ok ? c : '_';
  }
  if (s.size() > 63) s.resize(63);
  while (!s.empty() &&
         !((s.back() >= 'a' && s.back() <= 'z') || (s.back() >= 'A' && s.back() <= 'Z') ||
           (s.back() >= '0' && s.back() <= '9'))) {
    s.pop_back();
  }
  return s;
}

}  // namespace

DeviceIndex::DeviceIndex(const PlannedResource& resource) : resource_(&resource) {
  std::unordered_map<std::string, int> units, gpus;
  const int n = static_cast<int>(resource.devices.size());
  by_id_.reserve(n);
  unit_of_.resize(n);
  gpu_of_.resize(n);
  for (int i = 0; i < n; ++i) {
    const PlannedDevice& d = resource.devices[i];
    by_id_.emplace(d.id, i);
    auto u = units.emplace(d.device_uuid, static_cast<int>(units.size())).first->second;
    auto g = gpus.emplace(d.gpu_uuid, static_cast<int>(gpus.size())).first->second;
    unit_of_[i] = u;
    gpu_of_[i] = g;
    if (static_cast<int>(healthy_per_unit_.size()) <= u) healthy_per_unit_.resize(u + 1, 0);
    if (static_cast<int>(healthy_per_gpu_.size()) <= g) healthy_per_gpu_.resize(g + 1, 0);
    if (d.healthy) {
      healthy_per_unit_[u]++;
      healthy_per_gpu_[g]++;
    }
  }
}

int DeviceIndex::Position(const std::string& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? -1 : it->second;
}

const PlannedDevice* DeviceIndex::Find(const std::string& id) const {
  int p = Position(id);
  return p < 0 ? nullptr : &resource_->devices[p];
}

Result<ResolvedRequest> ResolveDevices(const DeviceIndex& index,
                                       const std::vector<std::string>& ids) {
  const PlannedResource& res = index.resource();
  if (ids.empty()) {
    return Status::InvalidArgument("resource " + res.name +
                                   ": container request has no device IDs (devices_ids is empty)");
  }
  std::vector<std::string> unknown, unhealthy, duplicate;
  std::set<std::string> seen;
  ResolvedRequest out;
  out.resource = &res;
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) {
      duplicate.push_back(id);
      continue;
    }
    const PlannedDevice* d = index.Find(id);
    if (d == nullptr) {
      unknown.push_back(id);
      continue;
    }
    if (!d->healthy) unhealthy.push_back(id);
    out.devices.push_back(d);
  }
  if (!unknown.empty()) {
    return Status::InvalidArgument("resource " + res.name +
                                   ": unknown device IDs: " + JoinIds(unknown));
  }
  if (!duplicate.empty()) {
    return Status::InvalidArgument("resource " + res.name +
                                   ": device IDs requested more than once: " + JoinIds(duplicate));
  }
  if (!unhealthy.empty()) {
    return Status::FailedPrecondition("resource " + res.name +
                                      ": devices are Unhealthy: " + JoinIds(unhealthy));
  }
  if (res.fail_requests_greater_than_one && res.replicas > 1 && out.devices.size() > 1) {
    return Status::FailedPrecondition(
        "resource " + res.name +
        " is time-sliced with failRequestsGreaterThanOne: a container may "
        "request at most 1 device, got " +
        std::to_string(out.devices.size()) + " (maximum request size for shared resources is 1)");
  }
  return out;
}

HostDeviceNodes ProbeHostDeviceNodes(const std::string& dev_root) {
  HostDeviceNodes n;
  n.nvidiactl = IsCharDevice(HostPath(dev_root, "/dev/nvidiactl"));
  n.nvidia_uvm = IsCharDevice(HostPath(dev_root, "/dev/nvidia-uvm"));
  n.nvidia_uvm_tools = IsCharDevice(HostPath(dev_root, "/dev/nvidia-uvm-tools"));
  n.nvidia_modeset = IsCharDevice(HostPath(dev_root, "/dev/nvidia-modeset"));
  for (const std::string& path : {HostPath(dev_root, "/proc/driver/nvidia-caps/mig-minors"),
                                  std::string("/proc/driver/nvidia-caps/mig-minors")}) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    n.mig_minors = ParseMigMinors(text.str());
    n.mig_minors_source = path;
    break;
  }
  return n;
}

std::map<std::string, int> ParseMigMinors(const std::string& text) {
  std::map<std::string, int> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string name, minor, extra;
    if (!(l >> name >> minor) || (l >> extra)) continue;
    if (minor.empty() || minor.size() > 9 ||
        minor.find_first_not_of("0123456789") != std::string::npos)
      continue;
    out[name] = std::stoi(minor);
  }
  return out;
}

std::vector<std::string> VisibleDeviceNames(const ResolvedRequest& request,
                                            DeviceIdStrategy strategy) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const PlannedDevice* d : request.devices) {
    // Replicas of one GPU or MIG device share device_uuid: the container sees the device once.
    if (!seen.insert(d->device_uuid).second) continue;
    names.push_back(strategy == DeviceIdStrategy::kIndex ? d->device_index : d->device_uuid);
  }
  return names;
}

ExtraEnv ExtraEnv::FromConfig(const NodeConfig& config) {
  ExtraEnv e;
  e.gdrcopy = config.gdrcopy_enabled;
  e.gds = config.gds_enabled;
  e.mofed = config.mofed_enabled;
  e.imex_channels = config.imex.channel_ids;
  return e;
}

ContainerAllocation BuildContainerAllocation(const ResolvedRequest& request,
                                             const PluginFlags& flags, const HostDeviceNodes& nodes,
                                             const ExtraEnv& extra) {
  ContainerAllocation a;
  const std::vector<std::string> names = VisibleDeviceNames(request, flags.device_id_strategy);
  const DeviceListStrategy& s = flags.device_list_strategy;

  if (s.envvar) a.envs[kVisibleDevicesEnv] = Join(names, ",");
  if (s.volume_mounts) {
    // The runtime hook reads the device list from the mount points; the env only points at them.
    a.envs[kVisibleDevicesEnv] = kVolumeMountsRoot;
    for (const std::string& n : names) {
      a.mounts.push_back(MountSpec{std::string(kVolumeMountsRoot) + "/" + n, "/dev/null", false});
    }
  }
  if (s.cdi_annotations || s.cdi_cri) {
    std::vector<std::string> cdi;
    for (const std::string& n : names) cdi.push_back(flags.cdi_vendor_class + "=" + n);
    if (s.cdi_annotations) {
      a.annotations[flags.cdi_annotation_prefix + AnnotationKeyName(request.resource->name)] =
          Join(cdi, ",");
    }
    if (s.cdi_cri) a.cdi_devices = cdi;
  }
  if (s.envvar && !extra.imex_channels.empty()) {
    std::vector<std::string> ch;
    for (int c : extra.imex_channels) ch.push_back(std::to_string(c));
    a.envs["NVIDIA_IMEX_CHANNELS"] = Join(ch, ",");
  }
  if (extra.gdrcopy) a.envs["NVIDIA_GDRCOPY"] = "enabled";
  if (extra.gds) a.envs["NVIDIA_GDS"] = "enabled";
  if (extra.mofed) a.envs["NVIDIA_MOFED"] = "enabled";
  if (flags.pass_device_specs) {
    std::set<int> gpus;
    for (const PlannedDevice* d : request.devices) {
      if (!gpus.insert(d->gpu_index).second) continue;
      std::string p = "/dev/nvidia" + std::to_string(d->gpu_index);
      a.device_nodes.push_back({p, HostPath(flags.nvidia_dev_root, p), "rw"});
    }
    auto add = [&](bool present, const char* p) {
      if (present) a.device_nodes.push_back({p, HostPath(flags.nvidia_dev_root, p), "rw"});
    };
    add(nodes.nvidiactl, "/dev/nvidiactl");
    add(nodes.nvidia_uvm, "/dev/nvidia-uvm");
    add(nodes.nvidia_uvm_tools, "/dev/nvidia-uvm-tools");
    add(nodes.nvidia_modeset, "/dev/nvidia-modeset");
    // MIG devices: the capability nodes of their GPU instance and compute instance.
    std::set<std::string> caps;
    for (const PlannedDevice* d : request.devices) {
      if (!d->is_mig) continue;
      const std::string gi =
          "gpu" + std::to_string(d->gpu_index) + "/gi" + std::to_string(d->mig_gi);
      for (const std::string& key :
           {gi + "/access", gi + "/ci" + std::to_string(d->mig_ci) + "/access"}) {
        auto m = nodes.mig_minors.find(key);
        if (m == nodes.mig_minors.end()) {
          a.problem = "passDeviceSpecs: no nvidia-caps minor for " + key + " of MIG device " +
                      d->device_uuid +
                      (nodes.mig_minors_source.empty()
                           ? std::string(" (/proc/driver/nvidia-caps/mig-minors is not readable)")
                           : " in " + nodes.mig_minors_source);
          return a;
        }
        const std::string p = "/dev/nvidia-caps/nvidia-cap" + std::to_string(m->second);
        if (caps.insert(p).second)
          a.device_nodes.push_back({p, HostPath(flags.nvidia_dev_root, p), "rw"});
      }
    }
  }
  return a;
}

}  // namespace gpushare::deviceplugin
