// SchedulerMetrics: gpushare-scheduler's /metrics, on prometheus-cpp (metric types, registry,
// text exposition; no HTTP exposer: the series are served by net/http_server.h on the
// paths it always served).
//
// Two kinds of series (docs/scheduler.md lists every one):
//   - observed as things happen, in a prometheus::Registry: the latency histograms of filter,
//     prioritize and bind, and the failure counters labelled with core/reasons.h codes
//     (filter rejections per node, bind failures);
//   - read at scrape time: the counters the extender, the HTTP server and the webhook keep as
//     atomics (StatsFamilies, from plain values), and the per-GPU gauges from the GpuCache
//     (GpuCollector, a prometheus::Collectable visiting the cache under its one mutex; the
//     samples are built there, the text is written after the lock is released).
//
// Every series has `# HELP` and `# TYPE`. Series names are stable once released.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memshare.h"
#include "scheduler/cache.h"

namespace gpushare::net {
struct HttpServerStats;
}  // namespace gpushare::net

namespace gpushare::scheduler {

struct ExtenderStats;
struct WebhookCertStats;

// The histograms' upper bounds, in seconds: 100 us to 10 s.
const std::vector<double>& LatencyBuckets();

class SchedulerMetrics {
 public:
  SchedulerMetrics();
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;

  void ObserveFilter(double seconds) { filter_->Observe(seconds); }
  void ObservePrioritize(double seconds) { prioritize_->Observe(seconds); }
  void ObserveBind(double seconds) { bind_->Observe(seconds); }
  void ObservePreempt(double seconds) { preempt_->Observe(seconds); }
  // A preempt call's outcome: a node chosen with `victims` pods to evict ("nominated"), or no
  // node where evicting frees a GPU ("not_helpful").
  void CountPreemption(bool nominated, size_t victims);
  // `code`: core/reasons.h. Rejections are counted per node (a filter of 100 nodes that rejects
  // 99 of them adds 99).
  void CountFilterRejections(std::string_view code, double nodes = 1);
  void CountBindFailure(std::string_view code);

  std::vector<prometheus::MetricFamily> Collect() const { return registry_->Collect(); }

 private:
  prometheus::Counter& ByReason(prometheus::Family<prometheus::Counter>& family,
                                std::vector<std::pair<std::string, prometheus::Counter*>>& known,
                                std::string_view code);
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* filter_;
  prometheus::Histogram* prioritize_;
  prometheus::Histogram* bind_;
  prometheus::Histogram* preempt_;
  prometheus::Counter* preempt_nominated_;
  prometheus::Counter* preempt_not_helpful_;
  prometheus::Counter* preempt_victims_;
  prometheus::Family<prometheus::Counter>* rejections_;
  prometheus::Family<prometheus::Counter>* bind_failures_;
  // The codes' counters, created up front (every series exists from the start at 0, so rate()
  // sees the first failure); looked up without the family's lock.
  std::vector<std::pair<std::string, prometheus::Counter*>> rejection_codes_, bind_codes_;
};

// Per-GPU gauges from the cache at scrape time: gpushare_scheduler_gpu_memory_bytes and
// gpushare_scheduler_gpu_memory_allocated_bytes (labels node, uuid, index).
class GpuCollector : public prometheus::Collectable {
 public:
  GpuCollector(const GpuCache& cache, memshare::MemoryUnit unit) : cache_(cache), unit_(unit) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

  // What Collect reads under the cache's lock: the few fields of each GPU (the node's name is
  // shared by its GPUs), so that filter and bind wait for a copy, not for the samples.
  struct Row {
    const std::string* node;  // into Snapshot::nodes
    std::string uuid;
    int index = 0;
    int64_t memory_mib = 0;
    int64_t used_units = 0;
    int64_t core = 0;  // compute shares booked, in percent
  };
  struct Snapshot {
    std::deque<std::string> nodes;
    std::vector<Row> gpus;
  };
  Snapshot Take() const;

 private:
  const GpuCache& cache_;
  const memshare::MemoryUnit unit_;
};

// What the scrape reads from the parts' own counters.
struct MetricsSnapshot {
  const ExtenderStats* extender = nullptr;
  const CacheStats* cache = nullptr;
  const net::HttpServerStats* http = nullptr;
  uint64_t assume_expired = 0;
  // The API client's counters (kube::ClientStats).
  uint64_t api_requests = 0, api_connections = 0, api_throttled = 0;
  bool ready = false;
  struct Webhook {
    uint64_t mutated = 0, unchanged = 0, invalid = 0, denied = 0;
    bool serving = false;
    const WebhookCertStats* certs = nullptr;  // self-managed certificates only
  };
  std::optional<Webhook> webhook;  // only with --webhook-listen
};
std::vector<prometheus::MetricFamily> StatsFamilies(const MetricsSnapshot& s);

// The text exposition (format 0.0.4) of all the families, sorted by name.
std::string Serialize(std::vector<prometheus::MetricFamily> families);

}  // namespace gpushare::scheduler
