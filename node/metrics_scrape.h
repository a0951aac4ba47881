// MetricsScraper: gathers one scrape's input on a real node (node/metrics.h ScrapeInput) and
// renders it: the agent's view from NodeMetrics, the containers from kubelet's PodResources
// (node/pod_resources.h), and the per-container state directories under the stateDirs
// (node/interposer_mounts.h): each directory's `allocation` marker, and the region file of
// those whose allocation kubelet still lists (read by node/region_reader.h: read-only, no lock).
// Scrapes run one at a time (PodResourcesClient is thread-compatible; concurrent scrapes would
// only repeat the same work). Nothing here can block a container.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/sync.h"
#include "node/metrics.h"
#include "node/pod_resources.h"
#include "node/region_reader.h"

namespace gpushare::node {

// The region file of a state directory: <dir>/shared/region (mounted at kContainerRegionPath).
std::string RegionPathOf(const std::string& state_subdir);

// Reads the markers of every state directory under `state_dir` and the regions of those whose
// allocation key is in `wanted`. Each skipped region is reported to `skipped` (with its path).
std::vector<ContainerRegion> ReadContainerRegions(
    const std::string& state_dir, const std::set<std::string>& wanted,
    const RegionReaderOptions& reader,
    const std::function<void(const std::string& path, RegionSkip why)>& skipped);

struct ScrapeSources {
  std::string node_name;
  std::string pod_resources_socket;  // "" = no PodResources (no container series)
  // State directories besides the loaded config's (every stateDir loaded since the start).
  std::function<std::vector<std::string>()> extra_state_dirs;
  std::string proc_locks = "/proc/locks";
  std::chrono::milliseconds pod_resources_timeout{2000};
  std::shared_ptr<Clock> clock = RealClock();  // its wall time (UnixNs) stamps the scrape
};

class MetricsScraper {
 public:
  MetricsScraper(std::shared_ptr<NodeMetrics> metrics, ScrapeSources sources);
  ~MetricsScraper();

  // The input of a scrape (for tests), and the exposition.
  ScrapeInput Gather() GPUSHARE_EXCLUDES(mu_);
  std::string Scrape() GPUSHARE_EXCLUDES(mu_);

 private:
  ScrapeInput GatherLocked() GPUSHARE_REQUIRES(mu_);
  std::shared_ptr<NodeMetrics> metrics_;
  const ScrapeSources sources_;
  const bool locks_complete_;  // in the host PID namespace: /proc/locks lists every flock
  Mutex mu_;
  std::unique_ptr<PodResourcesClient> pods_ GPUSHARE_GUARDED_BY(mu_);
  std::set<std::string> logged_skips_ GPUSHARE_GUARDED_BY(mu_);  // paths logged once (bounded)
};

}  // namespace gpushare::node
