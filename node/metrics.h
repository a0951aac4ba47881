// NodeMetrics: what gpushare-node's /metrics, /healthz and /readyz say (docs/node-agent.md,
// "Metrics and health", lists every series).
//
// Two kinds of series:
//   * the agent's own counters (registrations, kubelet restarts, Allocate calls and refusals by
//     core/reasons.h code, reconcile corrections, skipped regions, scrape duration), kept in a
//     prometheus-cpp Registry for the life of the process and bumped by the agent's threads
//     through the AgentObserver interface (node/agent.h) and, for Allocate, the device plugin
//     servers' deviceplugin::AllocateObserver;
//   * the state series (per GPU, per container), rebuilt for every scrape from a ScrapeInput:
//     the agent's latest inventory and plan (health applied), the containers kubelet's
//     PodResources lists, and the per-container accounting regions (node/region_reader.h)
//     matched to those containers through each state directory's `allocation` marker. Building
//     them fresh means a container that is gone has no series any more, without bookkeeping.
// AddStateSeries is a pure function of its input (tests feed known states and compare the
// exposition lines); node/metrics_scrape.h gathers the input on a real node.
// `--metrics-names`: gpushare's names, HAMi's (the vGPU monitor's and scheduler's names and
// labels, so HAMi dashboards work unchanged), or both.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/sync.h"
#include "core/inventory.h"
#include "core/library_gc.h"
#include "core/resource_plan.h"
#include "core/status.h"
#include "deviceplugin/allocate_observer.h"
#include "node/agent.h"
#include "node/pod_resources.h"
#include "node/region_reader.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace gpushare::node {

enum class MetricNames { kGpushare, kHami, kBoth };
// "gpushare", "hami" or "both"; kInvalidArgument naming the value otherwise.
Result<MetricNames> ParseMetricNames(std::string_view text);

// The agent's latest state, as PlanChanged and HealthEventSeen left it.
struct NodeView {
  bool loaded = false;  // an inventory was read and a plan built
  Inventory inventory;
  ResourcePlan plan;  // health applied
  int max_clients_per_gpu = 48;
  std::string state_dir;                     // gpushare.interposer.stateDir
  std::map<std::string, uint32_t> last_xid;  // physical GPU UUID -> latest XID seen
};

// One per-container state directory (node/interposer_mounts.h) and its region, if readable.
struct ContainerRegion {
  std::string dir;
  AllocationMarker marker;
  int64_t marker_mtime_ns = 0;  // the newest directory wins for a container (kubelet re-Allocates)
  bool has_region = false;      // the region was read (not skipped)
  RegionReading reading;
};

struct ScrapeInput {
  std::string node_name;
  NodeView node;
  bool pods_known = false;  // PodResources answered
  std::vector<ContainerDevices> pods;
  std::vector<ContainerRegion> regions;
  int64_t now_s = 0;  // wall clock, for the seconds since the last kernel launch
};

// The key a container's allocation is matched by: the resource and its device IDs, sorted
// (PodResources lists a container's devices; the state directory's marker those of its Allocate).
std::string AllocationKey(const std::string& resource, std::vector<std::string> device_ids);

// Adds the per-GPU and per-container families of one scrape to `out`.
void AddStateSeries(const ScrapeInput& in, MetricNames names, prometheus::Registry* out);

struct NodeMetricsOptions {
  MetricNames names = MetricNames::kGpushare;
  std::string version;  // gpushare_build_info
  std::string commit;
  // /healthz fails when the agent's loop has not turned for this long (the loop turns at least
  // every 500 ms while kubelet's files are checked).
  int64_t stall_ms = 60'000;
};

// What /healthz or /readyz answers.
struct Probe {
  bool ok = false;
  std::string reason;
};

class NodeMetrics : public AgentObserver, public deviceplugin::AllocateObserver {
 public:
  explicit NodeMetrics(NodeMetricsOptions options);
  ~NodeMetrics() override;

  // AgentObserver.
  void PlanChanged(const AgentInputs& inputs, const ResourcePlan& plan) override
      GPUSHARE_EXCLUDES(mu_);
  void HealthEventSeen(const HealthEvent& ev) override GPUSHARE_EXCLUDES(mu_);
  void Registered(const std::string& resource) override GPUSHARE_EXCLUDES(mu_);
  void KubeletRestarted() override GPUSHARE_EXCLUDES(mu_);
  void LoopTurned(int64_t now_ms) override;
  // AllocateObserver: gpushare_node_allocate_total, or the refusals by code.
  void OnAllocate(const deviceplugin::AllocateOutcome& outcome) override;

  // Memory-share reconciler corrections (kind: what was corrected).
  void ReconcileCorrected(std::string_view kind);
  // A region file was skipped (node/region_reader.h).
  void RegionSkipped(RegionSkip why);
  void ScrapeTook(double seconds);

  NodeView View() const GPUSHARE_EXCLUDES(mu_);

  // The text exposition of the counters and the state series of `in`.
  std::string Exposition(const ScrapeInput& in) const;

  // /healthz: the agent's loop turned within stall_ms of now_ms (its clock).
  Probe Healthz(int64_t now_ms) const;
  // /readyz: the inventory is read and every planned resource is registered with kubelet.
  Probe Readyz() const GPUSHARE_EXCLUDES(mu_);

 private:
  const NodeMetricsOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* registrations_;
  prometheus::Family<prometheus::Counter>* kubelet_restarts_;
  prometheus::Family<prometheus::Counter>* allocates_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Family<prometheus::Counter>* corrections_;
  prometheus::Family<prometheus::Counter>* region_skips_;
  prometheus::Histogram* scrape_seconds_;

  std::atomic<int64_t> last_turn_ms_{-1};
  mutable Mutex mu_;
  NodeView view_ GPUSHARE_GUARDED_BY(mu_);
  std::set<std::string> registered_ GPUSHARE_GUARDED_BY(mu_);
};

}  // namespace gpushare::node
