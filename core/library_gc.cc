#include "core/library_gc.h"

#include <sstream>

namespace gpushare {

std::string EncodeAllocationMarker(const AllocationMarker& m) {
  std::string s;
  if (!m.library_dir.empty()) s += "library=" + m.library_dir + "\n";
  s += "resource=" + m.resource + "\n";
  for (const std::string& id : m.device_ids) s += "device=" + id + "\n";
  return s;
}

Result<AllocationMarker> ParseAllocationMarker(const std::string& text) {
  AllocationMarker m;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string key = eq == std::string::npos ? line : line.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : line.substr(eq + 1);
    if (eq == std::string::npos || value.empty())
      return Status::InvalidArgument("line " + std::to_string(n) + ": want key=value, got \"" +
                                     line + "\"");
    if (key == "library") {
      m.library_dir = value;
    } else if (key == "resource") {
      m.resource = value;
    } else if (key == "device") {
      m.device_ids.push_back(value);
    } else {
      return Status::InvalidArgument("line " + std::to_string(n) + ": unknown key \"" + key + "\"");
    }
  }
  if (m.resource.empty()) return Status::InvalidArgument("no resource= line");
  if (m.device_ids.empty()) return Status::InvalidArgument("no device= line");
  return m;
}

GcPlan PlanCollection(const GcInput& in) {
  GcPlan plan;
  if (!in.live_listed) {
    plan.skipped = "kubelet's PodResources could not be listed: nothing is collected";
    return plan;
  }
  std::set<std::string> referenced;  // library directories of the state directories that stay
  bool unknown_use = !in.state_dirs_listed;
  for (const StateDirSeen& d : in.state_dirs) {
    const bool old = d.age_s >= in.grace_s;
    if (!d.answered) {
      if (old) {
        plan.state_dirs.push_back(
            {d.path, "incomplete (no ld.so.preload: its Allocate never answered)"});
      }
      // Young and incomplete: an Allocate is writing it; it mounts the current library.
      continue;
    }
    if (!d.marked) {
      plan.kept_unmarked.push_back(d.path);
      unknown_use = true;
      continue;
    }
    bool in_use = false;
    for (const std::string& id : d.marker.device_ids) {
      if (in.live.count({d.marker.resource, id})) {
        in_use = true;
        break;
      }
    }
    if (old && !in_use) {
      plan.state_dirs.push_back(
          {d.path, "kubelet allocates none of its devices (" + d.marker.resource + ")"});
      continue;
    }
    if (!d.marker.library_dir.empty()) referenced.insert(d.marker.library_dir);
  }
  if (unknown_use || in.current_library_dir.empty()) return plan;
  for (const LibraryDirSeen& l : in.library_dirs) {
    if (l.path == in.current_library_dir || l.age_s < in.grace_s || referenced.count(l.path))
      continue;
    plan.library_dirs.push_back(
        {l.path, "not the installed version and no container's state refers to it"});
  }
  return plan;
}

}  // namespace gpushare
