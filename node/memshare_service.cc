// See memshare_service.h.
#include "node/memshare_service.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "base/logfmt.h"
#include "base/sync.h"
#include "config/duration.h"
#include "core/memshare_node.h"
#include "core/memshare_reconcile.h"
#include "core/memshare_timing.h"
#include "core/object_key.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/memshare_pod.h"
#include "node/node_pods.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using logfmt::Value;
namespace ms = memshare;

std::string Summary(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 3; ++i) s += (i ? "," : "") + ids[i];
  if (ids.size() > 3) s += ",...(" + std::to_string(ids.size()) + ")";
  return s;
}

// pod key -> its containers' units of one resource, in the pod's container order.
using Observed = std::map<std::string, std::vector<ms::ObservedContainer>>;

Observed ObservedOf(const std::vector<ContainerDevices>& listed, const std::string& resource) {
  Observed observed;
  for (const ContainerDevices& c : listed) {
    if (c.resource != resource || c.device_ids.empty()) continue;
    ms::ObservedContainer oc{c.container, c.device_ids};
    std::sort(oc.unit_ids.begin(), oc.unit_ids.end());
    observed[c.pod_namespace + "/" + c.pod_name].push_back(std::move(oc));
  }
  return observed;
}

ms::ScheduleTiming TimingOf(const MemoryShareOptions& o) {
  ms::ScheduleTiming t;
  t.reconcile_interval_ms = o.reconcile_interval.count();
  t.after_allocate_ms = o.after_allocate.count();
  t.min_list_interval_ms = o.min_list_interval.count();
  return t;
}

class Service final : public MemoryShareMode {
 public:
  explicit Service(MemoryShareOptions o)
      : opts_(std::move(o)), clock_(opts_.clock), schedule_(TimingOf(opts_), clock_->NowMs()) {}

  ~Service() override {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.NotifyAll();
    listed_cv_.NotifyAll();
    if (worker_.joinable()) worker_.join();
    if (pods_) pods_->Stop();
    if (nodes_) nodes_->Stop();
  }

  Status Start() {
    StartPodInformer();
    StartNodeInformer();
    GPUSHARE_RETURN_IF_ERROR(pods_->Start());
    GPUSHARE_RETURN_IF_ERROR(nodes_->Start());
    pod_resources_ = std::make_unique<PodResourcesClient>(opts_.pod_resources_socket);
    worker_ = std::thread([this] { Loop(); });
    spdlog::info("event=memshare_started node={} pod_resources={} reconcile_interval_ms={}",
                 opts_.node_name, opts_.pod_resources_socket, opts_.reconcile_interval.count());
    return Status::Ok();
  }

  // ---- MemoryShareMode ------------------------------------------------------------------
  void Update(const AgentInputs& inputs, const ResourcePlan& plan) override GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      inventory_ = inputs.inventory;
      config_ = inputs.config;
      const PlannedResource* r = ms::FindMemoryResource(plan);
      resource_name_ = r != nullptr ? r->name : config_.gpushare.memory_shares.resource_name;
      const PlannedResource* m = plan.Find(std::string(ms::kMilliResource));
      milli_name_ = m != nullptr && m->gpu_milli ? m->name : std::string();
      desired_ = ms::BuildNodeInventory(inputs.inventory, inputs.config, plan);
      desired_text_ = ms::EncodeInventory(desired_);
      schedule_.PlanChanged(clock_->NowMs());
    }
    cv_.NotifyAll();
  }

  deviceplugin::PreferredChooser Preferred() override {
    return [this](const deviceplugin::DeviceIndex& index,
                  const deviceplugin::PreferredAllocationQuery& q) {
      return Choose(index.resource(), q);
    };
  }

  deviceplugin::AllocationDecorator Decorator() override {
    return MemoryUnitsDecorator(
        [this](const ms::UnitAllocation& a, const std::vector<std::string>& ids) {
          return AfterAllocate(a, ids);
        });
  }

 private:
  // What a reconcile round needs of the state the agent thread updates.
  struct Snapshot {
    std::string resource;
    std::string milli;  // alibabacloud.com/gpu-milli when planned, else empty
    Inventory inventory;
    ms::NodeInventory desired;
  };

  // A pod's alibabacloud.com/gpu-milli request in milli (fractions: their milli; whole GPUs:
  // 1000 each), or nullopt when it asks none.
  std::optional<ms::PodRequest> MilliRequest(const kube::Pod& p) const GPUSHARE_REQUIRES(mu_) {
    Result<ms::PodRequest> req = kube::PodGpuRequest(p, resource_name_);
    if (!req.ok() || !req->milli()) return std::nullopt;
    Result<ms::PodRequest> milli = req->Resolve(ms::kMilliPerGpu);
    if (!milli.ok()) return std::nullopt;
    return *milli;
  }

  // The fraction ledger of alibabacloud.com/gpu-milli (slots in milli, as for units) and the
  // GPUs planned whole for pods whose containers kubelet has not admitted yet, oldest first.
  struct MilliView {
    ms::SlotLedger ledger;
    std::vector<int> whole;
  };
  MilliView Milli(const std::vector<std::shared_ptr<const kube::Pod>>& pods)
      GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    std::vector<ms::PlannedPod> plans;
    std::set<std::string> foreign;
    std::vector<std::pair<int64_t, std::vector<int>>> whole;  // (assume time, GPUs)
    for (const auto& p : pods) {
      if (!p || p->IsTerminal() || p->spec.node_name != opts_.node_name) continue;
      std::optional<ms::PodRequest> req = MilliRequest(*p);
      if (!req) continue;
      const ms::PodAssignment a = ms::ResolveAssignment(p->metadata.annotations, *req);
      ms::PodRequest fractions;
      std::vector<int> gpus;
      for (const ms::ContainerShare& c : req->app) {
        if (!c.whole) {
          fractions.app.push_back(c);
        } else if (auto g = a.planned.find(c.name); g != a.planned.end()) {
          gpus.push_back(g->second);
        }
      }
      if (!gpus.empty() && milli_holdings_.observed().count(p->Key()) == 0)
        whole.push_back({a.assume_time.value_or(0), std::move(gpus)});
      std::optional<ms::PlannedPod> plan = ms::PlanOf(p->Key(), fractions, a);
      if (plan) {
        plans.push_back(std::move(*plan));
      } else {
        foreign.insert(p->Key());  // whole GPUs only, or bound around the scheduler
      }
    }
    MilliView out;
    out.ledger = milli_holdings_.Ledger(plans, foreign, inventory_);
    std::stable_sort(whole.begin(), whole.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& w : whole) out.whole.insert(out.whole.end(), w.second.begin(), w.second.end());
    return out;
  }

  void StartPodInformer() {
    kube::InformerOptions po;
    po.field_selector = "spec.nodeName=" + opts_.node_name;
    po.log = [](const std::string& line) { spdlog::warn("component=pod_informer {}", line); };
    pods_ = std::make_unique<kube::PodInformer>(opts_.client, po);
    kube::InformerHandlers<kube::Pod> ph;
    ph.on_synced = [this] { cv_.NotifyAll(); };
    pods_->SetHandlers(std::move(ph));
  }

  void StartNodeInformer() {
    kube::InformerOptions no;
    no.field_selector = "metadata.name=" + opts_.node_name;
    no.log = [](const std::string& line) { spdlog::warn("component=node_informer {}", line); };
    nodes_ = std::make_unique<kube::NodeInformer>(opts_.client, no);
    kube::InformerHandlers<kube::Node> nh;
    nh.on_add = [this](const kube::Node& n) { CheckNode(n); };
    nh.on_update = [this](const kube::Node&, const kube::Node& n) { CheckNode(n); };
    nodes_->SetHandlers(std::move(nh));
  }

  // ---- GetPreferredAllocation -------------------------------------------------------------
  // The slots of this node: the plans of the pods bound here (not finished; pods being deleted
  // still hold their units) minus what kubelet holds.
  ms::SlotLedger Ledger(const std::vector<std::shared_ptr<const kube::Pod>>& pods)
      GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    std::vector<ms::PlannedPod> plans;
    std::set<std::string> foreign;
    for (const auto& p : pods) {
      if (!p || p->IsTerminal() || p->spec.node_name != opts_.node_name) continue;
      Result<ms::PodRequest> req = kube::PodMemRequest(*p, resource_name_);
      if (!req.ok() || req->empty()) continue;
      std::optional<ms::PlannedPod> plan =
          ms::PlanOf(p->Key(), *req, ms::ResolveAssignment(p->metadata.annotations, *req));
      if (plan) {
        plans.push_back(std::move(*plan));
      } else {
        foreign.insert(p->Key());
      }
    }
    return holdings_.Ledger(plans, foreign, inventory_);
  }

  Result<std::vector<std::string>> Choose(const PlannedResource& resource,
                                          const deviceplugin::PreferredAllocationQuery& q) {
    if (!WaitListed()) {
      spdlog::warn("event=memshare_pod_resources_not_listed action=best_fit waited_ms={}",
                   opts_.sync_wait.count());
    }
    const ms::UnitQuery uq{q.available, q.must_include, q.allocation_size};
    if (resource.gpu_milli) {
      // (must_include: the GPU is decided)
      const MilliView v = q.must_include.empty() ? Milli(BoundPods()) : MilliView{};
      return Answer(q, ms::ChooseMilli(resource, uq, v.ledger, v.whole), true);
    }
    if (!q.must_include.empty())
      return Answer(q, ms::ChooseUnits(resource, uq, {}));  // the GPU is decided
    return Answer(q, ms::ChooseUnits(resource, uq, Ledger(BoundPods())));
  }

  // A first request: the pods bound here as the API has them now (a pod deleted or bound a
  // moment ago must not be missed); the informer's copy when the API cannot answer.
  std::vector<std::shared_ptr<const kube::Pod>> BoundPods() {
    Result<std::vector<std::shared_ptr<const kube::Pod>>> fresh =
        ListNodePods(*opts_.client, opts_.node_name);
    if (fresh.ok()) return std::move(fresh).value();
    spdlog::warn("event=memshare_list_pods_failed action=use_cache error={}",
                 Value(fresh.status().message()));
    if (!pods_->HasSynced() && !pods_->WaitForSync(opts_.sync_wait)) {
      spdlog::warn("event=memshare_cache_not_synced action=best_fit waited_ms={}",
                   opts_.sync_wait.count());
    }
    return pods_->List();
  }

  Result<std::vector<std::string>> Answer(const deviceplugin::PreferredAllocationQuery& q,
                                          Result<ms::UnitChoice> c, bool milli = false)
      GPUSHARE_EXCLUDES(mu_) {
    if (!c.ok()) return c.status();
    {
      MutexLock lock(&mu_);
      (milli ? milli_holdings_ : holdings_)
          .Advised(c->gpu, c->key, q.allocation_size, !q.must_include.empty());
    }
    const std::string pod = c->steered ? c->steered->pod : "-";
    const std::string container = c->steered ? c->steered->container : "-";
    const bool promise_kept = c->key.has_value() || !q.must_include.empty() || !c->matched_pending;
    auto level = promise_kept ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level,
                "event=memshare_preferred size={} gpu={} reason={} pod={} container={} "
                "must_include={} chosen={} share={}",
                q.allocation_size, c->gpu, c->reason, Value(pod), Value(container),
                q.must_include.size(), Value(Summary(c->ids)), milli ? "milli" : "units");
    return c->ids;
  }

  // GetPreferredAllocation needs kubelet's holdings: after a start, the first List.
  bool WaitListed() GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    const int64_t deadline = clock_->NowMs() + opts_.sync_wait.count();
    schedule_.ListWanted(clock_->NowMs());
    cv_.NotifyAll();
    while (!holdings_.listed() && !stop_ && clock_->NowMs() < deadline) {
      clock_->WaitUntil(&mu_, &listed_cv_, deadline);
    }
    return holdings_.listed();
  }

  // ---- Allocate -----------------------------------------------------------------------------
  // Kubelet gave these units to a container: held from now on, before any List shows them;
  // a reconcile soon. Returns the container's compute share (0: none): the key of the slot
  // kubelet took the advice for, else that of the pending slots asking this size first
  // (memshare::PendingCore, from a fresh list of the pods bound here).
  int64_t AfterAllocate(const ms::UnitAllocation& a, const std::vector<std::string>& ids)
      GPUSHARE_EXCLUDES(mu_) {
    const bool whole = a.milli && ms::AsksWholeGpus(a.units);
    std::optional<ms::SlotKey> advised;
    {
      MutexLock lock(&mu_);
      const int64_t now = clock_->NowMs();
      // Whole GPUs hold no slot: every device of their GPUs is kubelet's, and the List says so.
      if (!a.milli) {
        advised = holdings_.Allocated(ids, a.gpu, now);
      } else if (!whole) {
        advised = milli_holdings_.Allocated(ids, a.gpu, now);
      }
      schedule_.Allocated(now);
    }
    cv_.NotifyAll();
    if (whole) return 0;
    if (advised) return advised->core;
    const auto n = static_cast<int64_t>(ids.size());
    const ms::SlotLedger ledger = a.milli ? Milli(BoundPods()).ledger : Ledger(BoundPods());
    const int64_t core = ms::PendingCore(ledger, n);
    spdlog::info("event=memshare_compute_unadvised size={} gpu={} compute_percent={}", n, a.gpu,
                 core);
    return core;
  }

  // ---- node annotation --------------------------------------------------------------------
  void CheckNode(const kube::Node& n) GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (desired_text_.empty()) return;
    auto it = n.metadata.annotations.find(std::string(ms::kInventoryAnnotation));
    if (it != n.metadata.annotations.end() && it->second == desired_text_ && CountMatches(n))
      return;
    if (schedule_.NodeDiffers())
      spdlog::info("event=memshare_node_differs node={} action=patch", opts_.node_name);
    cv_.NotifyAll();
  }

  bool CountMatches(const kube::Node& n) const GPUSHARE_REQUIRES(mu_) {
    if (!config_.gpushare.memory_shares.publish_gpu_count) return true;
    const ms::GpuCount c = ms::CountMemoryGpus(desired_);
    const std::string key(ms::kGpuCountResource);
    auto cap = n.status.capacity.find(key);
    auto alloc = n.status.allocatable.find(key);
    return cap != n.status.capacity.end() && cap->second == std::to_string(c.capacity) &&
           alloc != n.status.allocatable.end() && alloc->second == std::to_string(c.allocatable);
  }

  void Publish() GPUSHARE_EXCLUDES(mu_) {
    std::string text;
    bool count;
    ms::GpuCount c;
    {
      MutexLock lock(&mu_);
      text = desired_text_;
      count = config_.gpushare.memory_shares.publish_gpu_count;
      c = ms::CountMemoryGpus(desired_);
    }
    if (text.empty()) return;
    Status st = PatchNode(text, count ? std::optional<ms::GpuCount>(c) : std::nullopt);
    MutexLock lock(&mu_);
    schedule_.Published(st.ok(), clock_->NowMs());
    if (!st.ok()) {
      spdlog::warn("event=memshare_publish_failed node={} retry_ms={} error={}", opts_.node_name,
                   schedule_.publish_backoff_ms(), Value(st.message()));
      return;
    }
    if (text != published_text_) {
      spdlog::info(
          "event=memshare_published node={} gpus={} memory_gpus={} healthy_memory_gpus={} bytes={}",
          opts_.node_name, desired_.gpus.size(), c.capacity, c.allocatable, text.size());
    }
    published_text_ = text;
  }

  // The inventory annotation, then (with `count`) aliyun.com/gpu-count in the node's status.
  Status PatchNode(const std::string& text, std::optional<ms::GpuCount> count) {
    Result<kube::Node> n = opts_.client->PatchNodeAnnotations(
        opts_.node_name, {{std::string(ms::kInventoryAnnotation), text}});
    if (!n.ok() || !count) return n.status();
    const std::string key(ms::kGpuCountResource);
    nlohmann::json status = {{"capacity", {{key, std::to_string(count->capacity)}}},
                             {"allocatable", {{key, std::to_string(count->allocatable)}}}};
    return opts_.client->PatchNodeStatus(opts_.node_name, status).status();
  }

  // ---- reconciliation ---------------------------------------------------------------------
  // One round: kubelet's PodResources List (the observe step in core/memshare_reconcile.h
  // compares it with the pods' annotations), then the patches it calls for (the confirm step).
  void Reconcile() GPUSHARE_EXCLUDES(mu_) {
    const int64_t started = clock_->NowMs();
    if (!MayList(started)) return;
    Result<std::vector<ContainerDevices>> listed = pod_resources_->List(opts_.rpc_timeout);
    if (!listed.ok()) return ListFailed(listed.status());
    const Snapshot snap = TakeSnapshot();
    Observed observed = ObservedOf(*listed, snap.resource);
    const Observed milli = snap.milli.empty() ? Observed{} : ObservedOf(*listed, snap.milli);
    RecordListed(observed, milli, started);
    // A pod asks units or milli, never both (memshare::ComputePodRequest): one map for both.
    for (const auto& [key, containers] : milli) {
      auto& all = observed[key];
      all.insert(all.end(), containers.begin(), containers.end());
    }
    ms::Observation ob =
        reconciler_.Observe(observed, CachedPods(observed, snap), snap.inventory, snap.desired);
    const int patched = Confirm(&ob);
    Finish(ob, observed.size(), patched);
  }

  // Whether the pod cache has synced and the pacing allows a List now.
  bool MayList(int64_t now) GPUSHARE_EXCLUDES(mu_) {
    const bool synced = pods_->HasSynced();
    MutexLock lock(&mu_);
    if (synced) return schedule_.MayList(now);
    schedule_.NotSynced(now);
    return false;
  }

  void ListFailed(const Status& st) GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    schedule_.ListFailed(st.code() == StatusCode::kResourceExhausted, clock_->NowMs());
    spdlog::warn("event=memshare_pod_resources_failed socket={} retry_ms={} error={}",
                 opts_.pod_resources_socket, schedule_.list_backoff_ms(), Value(st.message()));
  }

  Snapshot TakeSnapshot() GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return {resource_name_, milli_name_, inventory_, desired_};
  }

  void RecordListed(const Observed& observed, const Observed& milli, int64_t started_ms)
      GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      holdings_.Listed(observed, started_ms, kUnlistedGraceMs);
      milli_holdings_.Listed(milli, started_ms, kUnlistedGraceMs);
    }
    listed_cv_.NotifyAll();
  }

  // The cache's view of the pods kubelet listed (those it has). A request in milli is resolved
  // against the node's GPUs as gpushare-scheduler resolves it, so both write the same units.
  std::map<std::string, ms::CachedPod> CachedPods(const Observed& observed, const Snapshot& snap) {
    const std::string& resource = snap.resource;
    std::map<std::string, ms::CachedPod> out;
    for (const auto& entry : observed) {
      std::shared_ptr<const kube::Pod> pod = pods_->Get(entry.first);
      if (!pod) continue;
      ms::CachedPod& c = out[entry.first];
      c.annotations = pod->metadata.annotations;
      c.resource_version = pod->metadata.resource_version;
      Result<ms::PodRequest> req = snap.milli.empty() ? kube::PodMemRequest(*pod, resource)
                                                      : kube::PodGpuRequest(*pod, resource);
      if (req.ok() && req->milli()) req = req->Resolve(ms::UniformShareUnits(snap.desired));
      if (req.ok()) {
        c.request = std::move(req).value();
      } else {
        c.request_error = req.status().message();
      }
    }
    return out;
  }

  // The confirm step: logs what the observe step found and writes its patches. Returns how
  // many were written; a failed one sets ob->retry_soon.
  int Confirm(ms::Observation* ob) {
    int patched = 0;
    for (const ms::PodDecision& d : ob->pods) {
      LogFindings(d);
      if (d.verdict != ms::PodVerdict::kPatch) continue;
      if (Patch(d)) {
        ++patched;
      } else {
        ob->retry_soon = true;
      }
    }
    return patched;
  }

  void LogFindings(const ms::PodDecision& d) {
    if (d.verdict == ms::PodVerdict::kUnreadable) {
      const std::string error = d.problems.empty() ? std::string() : d.problems[0];
      Once("request:" + d.key,
           "event=memshare_pod_unreadable pod=" + d.key + " error=" + Value(error));
      return;
    }
    for (const std::string& p : d.problems) {
      Once("problem:" + d.key + p,
           "event=memshare_pod_problem pod=" + d.key + " problem=" + Value(p));
    }
  }

  bool Patch(const ms::PodDecision& d) {
    kube::AnnotationChanges ac;
    for (const auto& [k, v] : d.changes) ac[k] = v;
    Result<kube::Pod> r = opts_.client->PatchPodAnnotations(ObjectKey::Of(d.key), ac);
    if (!r.ok()) {
      spdlog::warn("event=memshare_confirm_failed pod={} error={}", d.key,
                   Value(r.status().message()));
      return false;
    }
    reconciler_.Written(d);
    const bool assumed = d.before.state != ms::AssignmentState::kNone;
    spdlog::info("event=memshare_confirmed pod={} gpus={} assumed={} corrected={}", d.key,
                 Value(ms::EncodeContainerGpus(d.actual)),
                 Value(assumed ? ms::EncodeContainerGpus(d.before.gpus) : std::string("-")),
                 assumed && d.before.gpus != d.actual ? "true" : "false");
    if (assumed && d.before.gpus != d.actual && opts_.on_correction)
      opts_.on_correction("assignment");
    return true;
  }

  // Ends the round: the next one soon while kubelet's view is incomplete, else periodically.
  void Finish(const ms::Observation& ob, size_t pods, int patched) GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      const bool retry_soon = ob.retry_soon || holdings_.unlisted() > 0;  // until a List shows them
      schedule_.Reconciled(retry_soon, clock_->NowMs());
    }
    if (patched > 0 || !ready_logged_) {
      spdlog::info("event=memshare_reconciled pods={} confirmed={} patched={}", pods, ob.confirmed,
                   patched);
    }
    if (!ready_logged_) {
      ready_logged_ = true;
      spdlog::info("event=memshare_ready node={}", opts_.node_name);
    }
  }

  void Once(const std::string& key, const std::string& line) {
    if (logged_.insert(key).second) spdlog::warn("{}", line);
    if (logged_.size() > 10000) logged_.clear();
  }

  // ---- the worker -------------------------------------------------------------------------
  void Loop() {
    for (;;) {
      const std::optional<ms::WorkerStep> step = AwaitStep();
      if (!step) return;
      if (*step == ms::WorkerStep::kPublish) {
        Publish();
      } else {
        Reconcile();
      }
    }
  }

  // The next step the schedule says is due, waiting for it; nullopt once stopping.
  std::optional<ms::WorkerStep> AwaitStep() GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (!stop_) {
      const ms::WorkerStep step = schedule_.Next(clock_->NowMs());
      if (step != ms::WorkerStep::kWait) return step;
      clock_->WaitUntil(&mu_, &cv_, schedule_.NextWakeMs());
    }
    return std::nullopt;
  }

  const MemoryShareOptions opts_;
  const std::shared_ptr<Clock> clock_;
  std::unique_ptr<kube::PodInformer> pods_;
  std::unique_ptr<kube::NodeInformer> nodes_;
  std::unique_ptr<PodResourcesClient> pod_resources_;

  Mutex mu_;
  CondVar cv_;         // the schedule changed, or stop
  CondVar listed_cv_;  // a List was recorded, or stop
  bool stop_ GPUSHARE_GUARDED_BY(mu_) = false;
  Inventory inventory_ GPUSHARE_GUARDED_BY(mu_);
  NodeConfig config_ GPUSHARE_GUARDED_BY(mu_);
  std::string resource_name_ GPUSHARE_GUARDED_BY(mu_);
  std::string milli_name_ GPUSHARE_GUARDED_BY(mu_);  // empty: fractions not advertised
  ms::NodeInventory desired_ GPUSHARE_GUARDED_BY(mu_);
  std::string desired_text_ GPUSHARE_GUARDED_BY(mu_);
  std::string published_text_ GPUSHARE_GUARDED_BY(mu_);
  ms::WorkerSchedule schedule_ GPUSHARE_GUARDED_BY(mu_);
  // What kubelet holds: its last PodResources List and the allocations it made since.
  ms::KubeletHoldings holdings_ GPUSHARE_GUARDED_BY(mu_);
  ms::KubeletHoldings milli_holdings_ GPUSHARE_GUARDED_BY(mu_);  // fractions in milli
  // An allocation a List does not show this long after it is taken as failed.
  static constexpr int64_t kUnlistedGraceMs = 2000;

  // Worker thread only.
  ms::PodReconciler reconciler_;
  std::set<std::string> logged_;
  bool ready_logged_ = false;

  std::thread worker_;  // last
};

}  // namespace

deviceplugin::AllocationDecorator MemoryUnitsDecorator(
    std::function<int64_t(const ms::UnitAllocation&, const std::vector<std::string>& ids)>
        on_allocate) {
  return [on_allocate](const deviceplugin::ResolvedRequest& r,
                       deviceplugin::ContainerAllocation* a) -> Status {
    if (r.resource == nullptr || !r.resource->is_share_resource()) return Status::Ok();
    Result<ms::UnitAllocation> u = ms::CheckUnits(*r.resource, r.devices);
    if (!u.ok()) return u.status();
    for (const auto& [k, v] : ms::AllocationEnv(*u)) a->envs[k] = v;
    int64_t core = 0;
    if (on_allocate) {
      std::vector<std::string> ids;
      for (const PlannedDevice* d : r.devices) ids.push_back(d->id);
      core = on_allocate(*u, ids);
    }
    a->sm_limit_percent = static_cast<uint32_t>(std::clamp<int64_t>(core, 0, ms::kMaxCorePercent));
    spdlog::info(
        "event=memshare_allocate gpu={} uuid={} units={} gpu_units={} limit_mib={} "
        "compute_percent={} resource={}",
        u->gpu, u->gpu_uuid, u->units, u->gpu_units, u->limit_mib, core, r.resource->name);
    return Status::Ok();
  };
}

deviceplugin::PreferredChooser MemoryUnitsBestFit() {
  return [](const deviceplugin::DeviceIndex& index,
            const deviceplugin::PreferredAllocationQuery& q) -> Result<std::vector<std::string>> {
    const ms::UnitQuery uq{q.available, q.must_include, q.allocation_size};
    Result<ms::UnitChoice> c = index.resource().gpu_milli
                                   ? ms::ChooseMilli(index.resource(), uq, {}, {})
                                   : ms::ChooseUnits(index.resource(), uq, ms::SlotLedger{});
    if (!c.ok()) return c.status();
    return c->ids;
  };
}

Result<std::unique_ptr<MemoryShareMode>> StartMemoryShares(MemoryShareOptions options) {
  if (options.node_name.empty()) {
    return Status::InvalidArgument(
        "--node-name (or NODE_NAME): required when gpushare.memoryShares selects GPUs (the agent "
        "publishes the "
        "node's GPUs and reads the pods bound to it)");
  }
  if (!options.client) return Status::InvalidArgument("memory shares: no Kubernetes API client");
  if (!options.clock) return Status::InvalidArgument("memory shares: no clock");
  if (options.pod_resources_socket.empty()) {
    return Status::InvalidArgument("--pod-resources-socket: must not be empty");
  }
  auto s = std::make_unique<Service>(std::move(options));
  GPUSHARE_RETURN_IF_ERROR(s->Start());
  return std::unique_ptr<MemoryShareMode>(std::move(s));
}

void AddMemoryShareFlags(CLI::App& app, MemoryShareFlags& flags) {
  app.add_option("--node-name", flags.node_name, "this node's name (memory shares) [env NODE_NAME]")
      ->envname("NODE_NAME");
  app.add_option(
      "--kubeconfig", flags.kubeconfig,
      "kubeconfig for the API server (memory shares; default $KUBECONFIG, then in-cluster)");
  app.add_option("--pod-resources-socket", flags.pod_resources_socket,
                 "kubelet's PodResources API socket")
      ->capture_default_str();
  app.add_option("--reconcile-interval", flags.reconcile_interval,
                 "how often the PodResources records are compared with the pods' annotations")
      ->capture_default_str();
}

Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig,
                                                    const std::string& purpose) {
  return MakeApiClient(kubeconfig, purpose, kube::ClientOptions{});
}

Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig,
                                                    const std::string& purpose,
                                                    const kube::ClientOptions& options) {
  kube::LoadOptions lo;
  lo.kubeconfig = kubeconfig;
  Result<kube::ClientConfig> cfg = kube::LoadClientConfig(lo);
  if (!cfg.ok())
    return Status::InvalidArgument(purpose + " need the Kubernetes API: " + cfg.status().message());
  for (const std::string& w : cfg->warnings)
    spdlog::warn("event=kube_config_warning warning={}", Value(w));
  Result<std::shared_ptr<kube::Client>> client = kube::Client::Create(*cfg, options);
  if (!client.ok())
    return Status::InvalidArgument(purpose +
                                   ": Kubernetes API client: " + client.status().message());
  spdlog::info("event=kube_config purpose={} source={} server={}", Value(purpose),
               Value(cfg->source), cfg->server);
  return client;
}

MemoryShareFactory MemoryShareFactoryFromFlags(
    const MemoryShareFlags& flags, std::function<void(std::string_view kind)> on_correction) {
  return [flags, on_correction](const AgentInputs&) -> Result<std::unique_ptr<MemoryShareMode>> {
    MemoryShareOptions o;
    o.on_correction = on_correction;
    o.node_name = flags.node_name;
    o.pod_resources_socket = flags.pod_resources_socket;
    std::optional<int64_t> ms = ParseDurationMs(flags.reconcile_interval);
    if (!ms || *ms <= 0) {
      return Status::InvalidArgument(
          "--reconcile-interval: must be a positive duration like 10s, got \"" +
          flags.reconcile_interval + "\"");
    }
    o.reconcile_interval = std::chrono::milliseconds(*ms);
    if (o.node_name.empty()) return StartMemoryShares(std::move(o));  // names the missing flag
    Result<std::shared_ptr<kube::Client>> client = MakeApiClient(flags.kubeconfig, "memory shares");
    if (!client.ok()) return client.status();
    o.client = *client;
    return StartMemoryShares(std::move(o));
  };
}

}  // namespace gpushare::node
