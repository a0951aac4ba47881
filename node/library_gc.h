// LibraryGc: the node agent's collection of per-container state directories and of old
// library versions (issue 12, "old versions are removed only when no container uses them").
// The decision is core/library_gc.h's PlanCollection; this part lists the directories, asks
// kubelet's PodResources what is allocated (node/pod_resources.h), deletes what the plan says
// and logs each removal (event=state_dir_removed, event=library_removed). It runs at the start
// and every --gc-interval (default 10m, 0 = never) on its own thread, never on the agent's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/sync.h"
#include "core/library_gc.h"
#include "core/status.h"
#include "node/agent.h"

namespace gpushare::node {

// Never younger than this: an Allocate just answered may not show in PodResources yet.
inline constexpr int64_t kGcGraceSeconds = 600;

// Where the loaded configs put things, kept by the interposer's decorator factory
// (node/interposer_mounts.h) at every load and read by the collection. Thread-safe.
class InterposerPaths {
 public:
  // After a load: its gpushare.interposer.stateDir and hostDir, and the library version
  // directory installed for it ("" when none was installed).
  void Loaded(const std::string& state_dir, const std::string& host_dir,
              const std::string& current_library_dir) GPUSHARE_EXCLUDES(mu_);

  struct View {
    std::vector<std::string>
        state_dirs;  // every stateDir loaded since the start (a reload may move it)
    std::string host_dir;
    std::string current_library_dir;
    bool loaded = false;
  };
  View Get() const GPUSHARE_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  View view_ GPUSHARE_GUARDED_BY(mu_);
};

// What kubelet allocates now; an error when PodResources did not answer.
using LiveDeviceLister = std::function<Result<std::set<LiveDevice>>()>;

// One collection at wall-clock time now_s: lists, plans, deletes, logs. Returns the plan
// (with what it could not delete logged, not returned).
GcPlan CollectOnce(const InterposerPaths::View& paths, const LiveDeviceLister& live, int64_t now_s,
                   int64_t grace_s = kGcGraceSeconds);

struct LibraryGcOptions {
  std::string pod_resources_socket;
  int64_t interval_ms = 600000;  // 0: no collection
};

// The periodic collection; null when the interval is 0.
std::unique_ptr<Companion> StartLibraryGc(std::shared_ptr<InterposerPaths> paths,
                                          LibraryGcOptions options);

}  // namespace gpushare::node
