// The in-container library on the host (issue 12, "the interposer on the host, safely").
// gpushare-node's image ships libgpushare-cuda.so; the agent copies it into
// gpushare.interposer.hostDir at a versioned path,
//     <hostDir>/<version>-<content hash>/libgpushare-cuda.so
// and Allocate mounts that file into containers. A path, once written, is never written again:
// a running container keeps the file it mapped, and an upgrade installs beside it instead of
// rewriting a mapped library in place. The directory appears complete or not at all (written
// under a temporary name, fsynced, renamed). Installing the same library again finds it and
// writes nothing; a directory of that name holding other bytes is an error, never overwritten.
// Old versions are kept (kubelet reuses a container's Allocate answer when the container
// restarts, so a pod started before an upgrade may still need its version).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpushare::node {

struct InstalledLibrary {
  std::string dir;       // <hostDir>/<version>-<hash>: what Allocate mounts from
  std::string path;      // dir + "/libgpushare-cuda.so"
  bool written = false;  // false: that version was already installed
};

// The largest library accepted (the real one is about 180 KiB).
inline constexpr size_t kMaxLibraryBytes = 64u << 20;

// Installs `source` into `host_dir` (absolute; created when missing) as above. Temporary
// directories left by an install that died (".install-*" older than 10 minutes) are removed.
// Errors name the path and what is wrong.
Result<InstalledLibrary> InstallLibrary(const std::string& source, const std::string& host_dir,
                                        std::string_view version);

}  // namespace gpushare::node
