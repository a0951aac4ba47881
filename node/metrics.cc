// See metrics.h.
#include "node/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <utility>

#include "core/memshare.h"
#include "core/reasons.h"

namespace gpushare::node {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

using Labels = std::map<std::string, std::string>;

// The plan's devices by (resource, device ID), with their resource.
struct PlanIndex {
  struct Entry {
    const PlannedResource* resource = nullptr;
    const PlannedDevice* device = nullptr;
  };
  std::map<std::pair<std::string, std::string>, Entry> by_id;
  explicit PlanIndex(const ResourcePlan& plan) {
    for (const PlannedResource& r : plan.resources)
      for (const PlannedDevice& d : r.devices) by_id[{r.name, d.id}] = {&r, &d};
  }
  const Entry* Find(const std::string& resource, const std::string& id) const {
    auto it = by_id.find({resource, id});
    return it == by_id.end() ? nullptr : &it->second;
  }
};

// whole | timeslice | mig | memshare: how the GPU's devices are advertised.
std::string GpuMode(const Gpu& g, const ResourcePlan& plan) {
  bool mig = false, ts = false, ms = false;
  for (const PlannedResource& r : plan.resources) {
    for (const PlannedDevice& d : r.devices) {
      if (d.gpu_uuid != g.uuid) continue;
      if (r.is_share_resource()) ms = true;
      if (d.is_mig) mig = true;
      if (!r.is_share_resource() && !d.is_mig && r.replicas > 1) ts = true;
    }
  }
  if (ms) return "memshare";
  if (mig || g.mig_enabled) return "mig";
  if (ts) return "timeslice";
  return "whole";
}

// One container's devices on one physical GPU.
struct Share {
  const ContainerDevices* container = nullptr;
  std::string gpu_uuid;
  int vdevice_index = 0;               // the GPU's position among the container's GPUs
  std::vector<std::string> resources;  // of its devices on this GPU
  std::set<std::string> device_hex;    // UUID hex of the devices it is given (GPU or MIG)
  std::string device_uuid;             // the first of them, as the container sees it
  uint64_t limit_mib = 0;              // memory limit (or the device's memory without one)
  uint64_t entitled_mib = 0;           // what it counts for in allocated memory
  double compute_ratio = 0;            // SM share (1 = the whole device)
  bool unlimited_compute = false;
  uint64_t milli = 0;                  // alibabacloud.com/gpu-milli devices on this GPU
  std::map<std::string, int> devices;  // resource -> devices allocated on this GPU
  // From its region, when one was read:
  bool has_region = false;
  uint64_t used = 0;
  uint64_t region_limit = 0;
  bool region_limited = false;
  uint32_t region_sm = 0;
  uint64_t last_launch_s = 0;
  uint64_t context_charge = 0;  // per context, the latest on the GPU's devices (0 = none)
  std::string context_charge_source;
};

// The newest region directory of every container, by (resource, device IDs).
std::map<std::string, const ContainerRegion*> RegionsByAllocation(
    const std::vector<ContainerRegion>& regions) {
  std::map<std::string, const ContainerRegion*> out;
  for (const ContainerRegion& r : regions) {
    const std::string k = AllocationKey(r.marker.resource, r.marker.device_ids);
    auto it = out.find(k);
    if (it == out.end() || it->second->marker_mtime_ns < r.marker_mtime_ns) out[k] = &r;
  }
  return out;
}

std::vector<Share> Shares(const ScrapeInput& in, const PlanIndex& index) {
  std::vector<Share> shares;
  if (!in.pods_known) return shares;
  const auto regions = RegionsByAllocation(in.regions);
  // Containers may list several resources; one Share per (container, GPU).
  std::map<std::tuple<std::string, std::string, std::string, std::string>, size_t> at;
  std::map<std::tuple<std::string, std::string, std::string>, int> gpus_of;
  for (const ContainerDevices& c : in.pods) {
    const ContainerRegion* region = nullptr;
    auto rit = regions.find(AllocationKey(c.resource, c.device_ids));
    if (rit != regions.end() && rit->second->has_region) region = rit->second;
    for (const std::string& id : c.device_ids) {
      const PlanIndex::Entry* e = index.Find(c.resource, id);
      if (e == nullptr) continue;  // another plugin's resource, or a device no longer planned
      const PlannedDevice& d = *e->device;
      auto key = std::make_tuple(c.pod_namespace, c.pod_name, c.container, d.gpu_uuid);
      auto found = at.find(key);
      if (found == at.end()) {
        Share s;
        s.container = &c;
        s.gpu_uuid = d.gpu_uuid;
        s.vdevice_index = gpus_of[{c.pod_namespace, c.pod_name, c.container}]++;
        s.device_uuid = d.device_uuid.empty() ? d.gpu_uuid : d.device_uuid;
        found = at.emplace(key, shares.size()).first;
        shares.push_back(std::move(s));
      }
      Share& s = shares[found->second];
      if (std::find(s.resources.begin(), s.resources.end(), c.resource) == s.resources.end())
        s.resources.push_back(c.resource);
      s.devices[c.resource]++;
      s.device_hex.insert(UuidHex(d.device_uuid.empty() ? d.gpu_uuid : d.device_uuid));
      const int replicas = std::max(1, e->resource->replicas);
      if (d.gpu_milli != 0) {
        // alibabacloud.com/gpu-milli: the exact fraction (core/interposer_contract.h).
        s.milli += d.gpu_milli;
        s.limit_mib = s.entitled_mib = static_cast<uint64_t>(memshare::MilliOfMemoryMiB(
            std::min<int64_t>(static_cast<int64_t>(s.milli), memshare::kMilliPerGpu),
            static_cast<int64_t>(d.memory_mib)));
      } else {
        s.limit_mib += d.memory_limit_mib != 0 ? d.memory_limit_mib : d.memory_mib;
        s.entitled_mib += d.memory_limit_mib != 0 ? d.memory_limit_mib
                                                  : d.memory_mib / static_cast<uint64_t>(replicas);
      }
      if (d.sm_share_ppm == 0) s.unlimited_compute = true;
      s.compute_ratio += d.sm_share_ppm / 1e6;
      if (region != nullptr && !s.has_region) {
        // The region's devices are those of this allocation: the ones on this GPU count here.
        s.has_region = true;
      }
    }
    if (region == nullptr) continue;
    for (Share& s : shares) {
      if (s.container != &c) continue;
      s.used = 0;
      s.region_limit = 0;
      s.region_limited = false;
      s.region_sm = 0;
      for (const RegionDeviceReading& rd : region->reading.devices) {
        if (s.device_hex.count(rd.uuid_hex) == 0) continue;
        s.used += rd.used;
        s.region_limit += rd.memory_limit;
        s.region_limited = s.region_limited || rd.memory_limited;
        s.region_sm = std::max(s.region_sm, rd.sm_limit);
        if (region->reading.live) s.last_launch_s = std::max(s.last_launch_s, rd.last_launch_s);
        if (rd.context_charge != 0) {
          s.context_charge = rd.context_charge;
          s.context_charge_source = rd.context_charge_source;
        }
      }
    }
  }
  for (Share& s : shares) {
    if (s.unlimited_compute || s.compute_ratio > 1) s.compute_ratio = 1;
    if (s.region_sm != 0) s.compute_ratio = s.region_sm / 100.0;
    if (s.region_limited && s.region_limit != 0)
      s.limit_mib = s.region_limit / (1024 * 1024);  // the enforced limit wins
  }
  return shares;
}

// A gauge family built for one scrape.
prometheus::Family<prometheus::Gauge>& G(prometheus::Registry* r, const std::string& name,
                                         const std::string& help, const Labels& constant = {}) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(constant).Register(*r);
}

}  // namespace

std::string AllocationKey(const std::string& resource, std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string k = resource;
  for (const std::string& id : ids) k += "\n" + id;
  return k;
}

Result<MetricNames> ParseMetricNames(std::string_view text) {
  if (text == "gpushare") return MetricNames::kGpushare;
  if (text == "hami") return MetricNames::kHami;
  if (text == "both") return MetricNames::kBoth;
  return Status::InvalidArgument("--metrics-names: must be gpushare, hami or both, got \"" +
                                 std::string(text) + "\"");
}

void AddStateSeries(const ScrapeInput& in, MetricNames names, prometheus::Registry* out) {
  const bool ours = names != MetricNames::kHami;
  const bool hami = names != MetricNames::kGpushare;
  const NodeView& v = in.node;
  if (!v.loaded) return;
  const PlanIndex index(v.plan);
  const std::vector<Share> shares = Shares(in, index);

  // ---- per GPU ----
  prometheus::Family<prometheus::Gauge>*mem = nullptr, *alloc = nullptr, *used = nullptr,
  *adv = nullptr, *dalloc = nullptr, *healthy = nullptr, *xid = nullptr, *clients = nullptr,
  *clients_max = nullptr;
  if (ours) {
    mem = &G(out, "gpushare_gpu_memory_bytes", "Total memory of the GPU.");
    alloc = &G(out, "gpushare_gpu_memory_allocated_bytes",
               "GPU memory allocated to containers: their memory limits (a container without one "
               "counts the device's memory divided by its replicas).");
    used = &G(out, "gpushare_gpu_memory_used_bytes",
              "GPU memory the containers' in-container library accounts as used, summed.");
    adv =
        &G(out, "gpushare_gpu_devices_advertised",
           "Devices of a resource (replicas, MIG instances, memory units) advertised on the GPU.");
    dalloc = &G(out, "gpushare_gpu_devices_allocated",
                "Devices of a resource on the GPU that kubelet has allocated to containers.");
    healthy = &G(out, "gpushare_gpu_healthy", "1 when every device of the GPU is Healthy.");
    xid = &G(out, "gpushare_gpu_last_xid", "The latest XID seen on the GPU (0 = none).");
    clients = &G(out, "gpushare_gpu_clients", "Containers that have devices of the GPU.");
    clients_max = &G(out, "gpushare_gpu_clients_max",
                     "The ceiling on containers sharing the GPU (gpushare.maxClientsPerGpu).");
  }
  const Labels zone = {{"zone", "vGPU"}};
  prometheus::Family<prometheus::Gauge>*h_limit = nullptr, *h_alloc = nullptr, *h_shared = nullptr,
  *h_core = nullptr;
  if (hami) {
    h_limit = &G(out, "hami_gpu_memory_limit_bytes", "GPU device memory limit (HAMi name).", zone);
    h_alloc = &G(out, "hami_gpu_memory_allocated_bytes", "GPU device memory allocated (HAMi name).",
                 zone);
    h_shared =
        &G(out, "hami_gpu_shared_count", "Containers sharing the GPU device (HAMi name).", zone);
    h_core = &G(out, "hami_gpu_core_allocated_ratio",
                "GPU device cores allocated, as a ratio (HAMi name).", zone);
  }
  for (const Gpu& g : v.inventory.gpus) {
    const Labels l = {{"node", in.node_name},
                      {"uuid", g.uuid},
                      {"index", std::to_string(g.index)},
                      {"model", g.product},
                      {"mode", GpuMode(g, v.plan)}};
    const double total = static_cast<double>(g.memory_mib) * kMiB;
    double allocated = 0, used_bytes = 0, cores = 0;
    int n_clients = 0;
    bool all_healthy = true;
    std::map<std::string, int> advertised, allocated_devices;
    for (const PlannedResource& r : v.plan.resources) {
      for (const PlannedDevice& d : r.devices) {
        if (d.gpu_uuid != g.uuid) continue;
        advertised[r.name]++;
        allocated_devices[r.name] += 0;
        all_healthy = all_healthy && d.healthy;
      }
    }
    for (const Share& s : shares) {
      if (s.gpu_uuid != g.uuid) continue;
      ++n_clients;
      allocated += static_cast<double>(s.entitled_mib) * kMiB;
      used_bytes += static_cast<double>(s.used);
      cores += s.compute_ratio;
      for (const auto& [res, n] : s.devices) allocated_devices[res] += n;
    }
    auto x = v.last_xid.find(g.uuid);
    if (ours) {
      mem->Add(l).Set(total);
      alloc->Add(l).Set(allocated);
      used->Add(l).Set(used_bytes);
      for (const auto& [res, n] : advertised) {
        Labels lr = l;
        lr["resource"] = res;
        adv->Add(lr).Set(n);
        dalloc->Add(lr).Set(allocated_devices[res]);
      }
      healthy->Add(l).Set(all_healthy ? 1 : 0);
      xid->Add(l).Set(x == v.last_xid.end() ? 0 : x->second);
      clients->Add(l).Set(n_clients);
      clients_max->Add(l).Set(v.max_clients_per_gpu);
    }
    if (hami) {
      const Labels hl = {{"node", in.node_name},
                         {"device_uuid", g.uuid},
                         {"device_index", std::to_string(g.index)},
                         {"device_type", "NVIDIA-" + g.product}};
      h_limit->Add(hl).Set(total);
      h_alloc->Add(hl).Set(allocated);
      h_shared->Add(hl).Set(n_clients);
      h_core->Add(hl).Set(cores);
    }
  }

  // ---- per container ----
  if (ours) {
    auto& limit = G(out, "gpushare_container_memory_limit_bytes",
                    "The container's GPU memory limit on the GPU (the device's memory when it has "
                    "no limit).");
    auto& cused = G(out, "gpushare_container_memory_used_bytes",
                    "GPU memory the container uses on the GPU, as its in-container library "
                    "accounts it (containers with an accounting region only).");
    auto& compute = G(out, "gpushare_container_compute_limit_ratio",
                      "The container's share of the GPU's SMs (1 = no limit).");
    auto& since = G(out, "gpushare_container_seconds_since_last_kernel_launch",
                    "Seconds since the container last launched a kernel on the GPU (about 1 s "
                    "resolution; containers with an accounting region and a launch only).");
    auto& ctx = G(out, "gpushare_container_context_charge_bytes",
                  "GPU memory charged against the container's limit for each CUDA context on the "
                  "GPU (the latest context's figure), and where the figure came from: "
                  "measured on the driver, an earlier measurement, the configured override, "
                  "fixed by configuration, or the built-in default.");
    for (const Share& s : shares) {
      const Labels l = {{"node", in.node_name},
                        {"namespace", s.container->pod_namespace},
                        {"pod", s.container->pod_name},
                        {"container", s.container->container},
                        {"uuid", s.gpu_uuid}};
      limit.Add(l).Set(static_cast<double>(s.limit_mib) * kMiB);
      compute.Add(l).Set(s.compute_ratio);
      if (s.has_region) cused.Add(l).Set(static_cast<double>(s.used));
      if (s.context_charge != 0) {
        Labels cl = l;
        cl["source"] = s.context_charge_source;
        ctx.Add(cl).Set(static_cast<double>(s.context_charge));
      }
      if (s.last_launch_s != 0) {
        const int64_t d = in.now_s - static_cast<int64_t>(s.last_launch_s);
        since.Add(l).Set(static_cast<double>(d < 0 ? 0 : d));
      }
    }
  }
  if (hami) {
    auto& vused = G(out, "hami_vgpu_memory_used_bytes", "vGPU device memory usage (HAMi name).");
    auto& vlimit = G(out, "hami_vgpu_memory_limit_bytes", "vGPU device memory limit (HAMi name).");
    auto& cmem =
        G(out, "hami_container_device_memory_bytes", "Container device memory usage (HAMi name).");
    auto& last = G(out, "hami_container_last_kernel_elapsed_seconds",
                   "Seconds since the container's last kernel (HAMi name).");
    auto& valloc = G(out, "hami_vgpu_memory_allocated_bytes",
                     "vGPU device memory allocated (HAMi scheduler name).", zone);
    auto& vcore = G(out, "hami_vgpu_core_allocated_ratio",
                    "vGPU device cores allocated (HAMi scheduler name).", zone);
    for (const Share& s : shares) {
      const Labels l = {{"namespace", s.container->pod_namespace},
                        {"pod", s.container->pod_name},
                        {"container", s.container->container},
                        {"vdevice_index", std::to_string(s.vdevice_index)},
                        {"device_uuid", s.device_uuid}};
      vlimit.Add(l).Set(static_cast<double>(s.limit_mib) * kMiB);
      if (s.has_region) {
        vused.Add(l).Set(static_cast<double>(s.used));
        cmem.Add(l).Set(static_cast<double>(s.used));
      }
      if (s.last_launch_s != 0) {
        const int64_t d = in.now_s - static_cast<int64_t>(s.last_launch_s);
        last.Add(l).Set(static_cast<double>(d < 0 ? 0 : d));
      }
      const Labels sl = {{"namespace", s.container->pod_namespace},
                         {"node", in.node_name},
                         {"pod", s.container->pod_name},
                         {"container_index", std::to_string(s.vdevice_index)},
                         {"device_uuid", s.gpu_uuid}};
      valloc.Add(sl).Set(static_cast<double>(s.entitled_mib) * kMiB);
      vcore.Add(sl).Set(s.compute_ratio);
    }
  }
}

NodeMetrics::NodeMetrics(NodeMetricsOptions options)
    : options_(std::move(options)), registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  registrations_ =
      &prometheus::BuildCounter()
           .Name("gpushare_node_registrations_total")
           .Help("Successful registrations of a resource's device plugin with kubelet.")
           .Register(r);
  kubelet_restarts_ = &prometheus::BuildCounter()
                           .Name("gpushare_node_kubelet_restarts_total")
                           .Help("Kubelet restarts the agent has seen.")
                           .Register(r);
  kubelet_restarts_->Add({});
  allocates_ = &prometheus::BuildCounter()
                    .Name("gpushare_node_allocate_total")
                    .Help("Containers Allocate answered, by resource.")
                    .Register(r);
  refusals_ = &prometheus::BuildCounter()
                   .Name("gpushare_node_allocate_refusals_total")
                   .Help("Containers Allocate refused, by resource and reason code.")
                   .Register(r);
  corrections_ = &prometheus::BuildCounter()
                      .Name("gpushare_node_reconcile_corrections_total")
                      .Help("Corrections the PodResources reconciler made, by kind.")
                      .Register(r);
  region_skips_ = &prometheus::BuildCounter()
                       .Name("gpushare_node_region_skips_total")
                       .Help("Accounting region files a scrape skipped, by why.")
                       .Register(r);
  // Series that exist from the start at 0, so that rate() and alerts see them.
  corrections_->Add({{"kind", "assignment"}});
  for (RegionSkip why : {RegionSkip::kTruncated, RegionSkip::kUnknownLayout, RegionSkip::kNotReady,
                         RegionSkip::kNotRegular, RegionSkip::kIo})
    region_skips_->Add({{"reason", RegionSkipName(why)}});
  scrape_seconds_ = &prometheus::BuildHistogram()
                         .Name("gpushare_node_scrape_duration_seconds")
                         .Help("Time to gather and render /metrics (the previous scrapes).")
                         .Register(r)
                         .Add({}, prometheus::Histogram::BucketBoundaries{
                                      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  prometheus::BuildGauge()
      .Name("gpushare_build_info")
      .Help("The running gpushare-node's version and commit (always 1).")
      .Register(r)
      .Add({{"version", options_.version}, {"commit", options_.commit}})
      .Set(1);
}

NodeMetrics::~NodeMetrics() = default;

void NodeMetrics::PlanChanged(const AgentInputs& inputs, const ResourcePlan& plan) {
  MutexLock l(&mu_);
  view_.loaded = true;
  view_.inventory = inputs.inventory;
  view_.plan = plan;
  view_.max_clients_per_gpu = inputs.config.gpushare.max_clients_per_gpu;
  view_.state_dir = inputs.config.gpushare.container_state_dir;
  // A resource that is no longer planned is no longer expected to register.
  std::set<std::string> still;
  for (const std::string& r : registered_)
    if (plan.Find(r) != nullptr) still.insert(r);
  registered_ = std::move(still);
}

void NodeMetrics::HealthEventSeen(const HealthEvent& ev) {
  if (ev.kind != HealthEventKind::kXid || ev.xid == 0) return;
  MutexLock l(&mu_);
  for (const Gpu& g : view_.inventory.gpus) {
    bool match = ev.uuid.empty() || ev.uuid == g.uuid;
    for (const MigInstance& m : g.mig) match = match || m.uuid == ev.uuid;
    if (match) view_.last_xid[g.uuid] = ev.xid;
  }
}

void NodeMetrics::Registered(const std::string& resource) {
  registrations_->Add({{"resource", resource}}).Increment();
  // The resource's Allocate counters exist from its registration at 0, every refusal code too.
  allocates_->Add({{"resource", resource}});
  for (std::string_view code :
       {reasons::kUnknownDevice, reasons::kGpuUnhealthy, reasons::kInvalidRequest,
        reasons::kDeviceNodesUnavailable, reasons::kInterposerSetupFailed})
    refusals_->Add({{"resource", resource}, {"reason", std::string(code)}});
  MutexLock l(&mu_);
  registered_.insert(resource);
}

void NodeMetrics::KubeletRestarted() {
  kubelet_restarts_->Add({}).Increment();
  MutexLock l(&mu_);
  registered_.clear();
}

void NodeMetrics::LoopTurned(int64_t now_ms) {
  last_turn_ms_.store(now_ms, std::memory_order_relaxed);
}

void NodeMetrics::OnAllocate(const deviceplugin::AllocateOutcome& outcome) {
  const std::string resource(outcome.resource);
  if (outcome.answered()) {
    allocates_->Add({{"resource", resource}}).Increment();
  } else {
    refusals_->Add({{"resource", resource}, {"reason", std::string(outcome.reason)}}).Increment();
  }
}

void NodeMetrics::ReconcileCorrected(std::string_view kind) {
  corrections_->Add({{"kind", std::string(kind)}}).Increment();
}

void NodeMetrics::RegionSkipped(RegionSkip why) {
  region_skips_->Add({{"reason", RegionSkipName(why)}}).Increment();
}

void NodeMetrics::ScrapeTook(double seconds) {
  scrape_seconds_->Observe(seconds);
}

NodeView NodeMetrics::View() const {
  MutexLock l(&mu_);
  return view_;
}

std::string NodeMetrics::Exposition(const ScrapeInput& in) const {
  prometheus::Registry state;
  AddStateSeries(in, options_.names, &state);
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> more = state.Collect();
  families.insert(families.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  return prometheus::TextSerializer().Serialize(families);
}

Probe NodeMetrics::Healthz(int64_t now_ms) const {
  const int64_t last = last_turn_ms_.load(std::memory_order_relaxed);
  if (last < 0) return {true, "ok: starting"};
  if (now_ms - last > options_.stall_ms)
    return {false,
            "the agent's loop has not turned for " + std::to_string((now_ms - last) / 1000) + " s"};
  return {true, "ok"};
}

Probe NodeMetrics::Readyz() const {
  MutexLock l(&mu_);
  if (!view_.loaded) return {false, "the GPU inventory has not been read yet"};
  std::string missing;
  for (const PlannedResource& r : view_.plan.resources) {
    if (registered_.count(r.name) != 0) continue;
    missing += (missing.empty() ? "" : ", ") + r.name;
  }
  if (!missing.empty()) return {false, "not registered with kubelet: " + missing};
  return {true, "ok"};
}

}  // namespace gpushare::node
