// LibraryGc: which per-container state directories and which installed library versions the
// node agent may delete (issue 12: "old versions are removed only when no container uses
// them"). Pure: what is on disk (names, references, ages), what kubelet has allocated and the
// time come in; what to delete comes out (node/library_gc.h lists, asks kubelet and deletes).
//
// Why it is safe. Kubelet reuses a container's Allocate answer when the container restarts,
// without asking again, so a per-container state directory (and the library version its
// answer mounts) is needed for as long as kubelet keeps those devices allocated to a container.
// Allocate writes, into the directory, an `allocation` marker (its resource, its device IDs and
// the library directory it mounted) before `ld.so.preload`, the last file; so
//   - a state directory is garbage when it is at least `grace` old and either kubelet allocates
//     none of its devices to any container (PodResources List), or it has no `ld.so.preload`
//     (the Allocate that made it never answered);
//   - a directory with `ld.so.preload` but no marker (written before markers existed, or
//     unreadable) is kept, and while one exists no library version is removed (it may use any);
//   - a library version directory is garbage when it is not the one installed now, is at least
//     `grace` old, and no state directory that stays refers to it;
//   - nothing at all is deleted when kubelet's PodResources could not be listed.
// `grace` (10 minutes in the agent) covers an Allocate just answered that PodResources does not
// show yet.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gpushare {

// The marker file's name inside a per-container state directory, and its contents:
//   library=<host dir of the library version mounted>   (absent: no library mounted)
//   resource=<resource name>
//   device=<device id>                                   (one line per device)
struct AllocationMarker {
  std::string library_dir;
  std::string resource;
  std::vector<std::string> device_ids;
  bool operator==(const AllocationMarker&) const = default;
};
inline constexpr const char* kAllocationMarkerName = "allocation";

std::string EncodeAllocationMarker(const AllocationMarker& m);
// kInvalidArgument naming the line for anything else (unknown key, no resource, no device).
Result<AllocationMarker> ParseAllocationMarker(const std::string& text);

// A device kubelet has allocated: (resource, device id).
using LiveDevice = std::pair<std::string, std::string>;

struct StateDirSeen {
  std::string path;
  int64_t age_s = 0;      // now - last modification; negative (clock moved back) counts as young
  bool answered = false;  // ld.so.preload exists
  bool marked = false;    // the marker was read and parsed
  AllocationMarker marker;
};

struct LibraryDirSeen {
  std::string path;
  int64_t age_s = 0;
};

struct GcInput {
  std::vector<StateDirSeen> state_dirs;
  bool state_dirs_listed =
      true;  // false: a state directory could not be listed (keep every library)
  std::vector<LibraryDirSeen> library_dirs;
  std::string
      current_library_dir;    // the version installed now (never removed); "" = unknown, keep all
  bool live_listed = false;   // PodResources answered
  std::set<LiveDevice> live;  // what it listed
  int64_t grace_s = 600;
};

struct GcRemoval {
  std::string path;
  std::string reason;
  bool operator==(const GcRemoval&) const = default;
};

struct GcPlan {
  std::vector<GcRemoval> state_dirs;
  std::vector<GcRemoval> library_dirs;
  std::vector<std::string> kept_unmarked;  // state directories kept because their use is unknown
  std::string skipped;                     // why nothing was collected ("" when it ran)
};

GcPlan PlanCollection(const GcInput& in);

}  // namespace gpushare
