// See memshare_service.h.
#include "node/memshare_service.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "config/duration.h"
#include "core/memshare_node.h"
#include "base/logfmt.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/memshare_pod.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using Clock = std::chrono::steady_clock;
using logfmt::Value;
namespace ms = memshare;

std::string Summary(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 3; ++i) s += (i ? "," : "") + ids[i];
  if (ids.size() > 3) s += ",...(" + std::to_string(ids.size()) + ")";
  return s;
}

class Service final : public MemoryShareMode {
 public:
  explicit Service(MemoryShareOptions o) : opts_(std::move(o)) {}

  ~Service() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    listed_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    if (pods_) pods_->Stop();
    if (nodes_) nodes_->Stop();
  }

  Status Start() {
    kube::InformerOptions po;
    po.field_selector = "spec.nodeName=" + opts_.node_name;
    po.log = [](const std::string& line) { spdlog::warn("component=pod_informer {}", line); };
    pods_ = std::make_unique<kube::PodInformer>(opts_.client, po);
    kube::InformerHandlers<kube::Pod> ph;
    ph.on_synced = [this] { Wake(); };
    pods_->SetHandlers(std::move(ph));

    kube::InformerOptions no;
    no.field_selector = "metadata.name=" + opts_.node_name;
    no.log = [](const std::string& line) { spdlog::warn("component=node_informer {}", line); };
    nodes_ = std::make_unique<kube::NodeInformer>(opts_.client, no);
    kube::InformerHandlers<kube::Node> nh;
    nh.on_add = [this](const kube::Node& n) { CheckNode(n); };
    nh.on_update = [this](const kube::Node&, const kube::Node& n) { CheckNode(n); };
    nodes_->SetHandlers(std::move(nh));

    GPUSHARE_RETURN_IF_ERROR(pods_->Start());
    GPUSHARE_RETURN_IF_ERROR(nodes_->Start());
    pod_resources_ = std::make_unique<PodResourcesClient>(opts_.pod_resources_socket);
    worker_ = std::thread([this] { Loop(); });
    spdlog::info("event=memshare_started node={} pod_resources={} reconcile_interval_ms={}", opts_.node_name,
                 opts_.pod_resources_socket, opts_.reconcile_interval.count());
    return Status::Ok();
  }

  // ---- MemoryShareMode ------------------------------------------------------------------
  void Update(const AgentInputs& inputs, const ResourcePlan& plan) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inventory_ = inputs.inventory;
      config_ = inputs.config;
      const PlannedResource* r = ms::FindMemoryResource(plan);
      resource_name_ = r != nullptr ? r->name : config_.gpushare.memory_shares.resource_name;
      desired_ = ms::BuildNodeInventory(inputs.inventory, inputs.config, plan);
      desired_text_ = ms::EncodeInventory(desired_);
      publish_due_ = true;
      publish_backoff_ms_ = 0;
      reconcile_at_ = Clock::now();
    }
    cv_.notify_all();
  }

  deviceplugin::PreferredChooser Preferred() override {
    return [this](const deviceplugin::DeviceIndex& index, const deviceplugin::PreferredAllocationQuery& q) {
      return Choose(index.resource(), q);
    };
  }

  deviceplugin::AllocationDecorator Decorator() override {
    return MemoryUnitsDecorator(
        [this](const ms::UnitAllocation& a, const std::vector<std::string>& ids) { AfterAllocate(a, ids); });
  }

 private:
  struct Written {
    std::string resource_version;  // of the pod before our patch
    std::map<std::string, std::string> changes;
  };

  void Wake() { cv_.notify_all(); }

  // ---- GetPreferredAllocation -------------------------------------------------------------
  // The slots of this node: the plans of the pods bound here (not finished; pods being deleted
  // still hold their units) minus what kubelet holds.
  ms::SlotLedger Ledger(const std::vector<std::shared_ptr<const kube::Pod>>& pods) {
    std::lock_guard<std::mutex> lock(mu_);
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
      spdlog::warn("event=memshare_pod_resources_not_listed action=best_fit waited_ms={}", opts_.sync_wait.count());
    }
    const ms::UnitQuery uq{q.available, q.must_include, q.allocation_size};
    if (!q.must_include.empty()) return Answer(q, ms::ChooseUnits(resource, uq, {}));  // the GPU is decided
    // A first request: the plans of the pods bound here as the API has them now (a pod deleted
    // or bound a moment ago must not be missed); the informer's copy when the API cannot answer.
    kube::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + opts_.node_name;
    Result<std::vector<kube::Pod>> fresh = opts_.client->ListPods("", lo);
    std::vector<std::shared_ptr<const kube::Pod>> pods;
    if (fresh.ok()) {
      for (kube::Pod& p : *fresh) pods.push_back(std::make_shared<const kube::Pod>(std::move(p)));
    } else {
      spdlog::warn("event=memshare_list_pods_failed action=use_cache error={}", Value(fresh.status().message()));
      if (!pods_->HasSynced() && !pods_->WaitForSync(opts_.sync_wait)) {
        spdlog::warn("event=memshare_cache_not_synced action=best_fit waited_ms={}", opts_.sync_wait.count());
      }
      pods = pods_->List();
    }
    return Answer(q, ms::ChooseUnits(resource, uq, Ledger(pods)));
  }

  Result<std::vector<std::string>> Answer(const deviceplugin::PreferredAllocationQuery& q, Result<ms::UnitChoice> c) {
    if (!c.ok()) return c.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      holdings_.Advised(c->gpu, c->key, q.allocation_size, !q.must_include.empty());
    }
    const std::string pod = c->steered ? c->steered->pod : "-";
    const std::string container = c->steered ? c->steered->container : "-";
    const bool promise_kept = c->key.has_value() || !q.must_include.empty() || !c->matched_pending;
    auto level = promise_kept ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level, "event=memshare_preferred size={} gpu={} reason={} pod={} container={} must_include={} chosen={}",
                q.allocation_size, c->gpu, c->reason, Value(pod), Value(container), q.must_include.size(),
                Value(Summary(c->ids)));
    return c->ids;
  }

  // GetPreferredAllocation needs kubelet's holdings: after a start, the first List.
  bool WaitListed() {
    std::unique_lock<std::mutex> lock(mu_);
    reconcile_at_ = std::min(reconcile_at_, Clock::now());
    cv_.notify_all();
    return listed_cv_.wait_for(lock, opts_.sync_wait, [&] { return holdings_.listed() || stop_; }) &&
           holdings_.listed();
  }

  // ---- Allocate -----------------------------------------------------------------------------
  // Kubelet gave these units to a container: held from now on, before any List shows them.
  void AfterAllocate(const ms::UnitAllocation& a, const std::vector<std::string>& ids) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      holdings_.Allocated(ids, a.gpu, NowMs());
    }
    ReconcileSoon();
  }

  void ReconcileSoon() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Clock::time_point at = Clock::now() + opts_.after_allocate;
      if (at < reconcile_at_) reconcile_at_ = at;
    }
    cv_.notify_all();
  }

  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  }

  // ---- node annotation --------------------------------------------------------------------
  void CheckNode(const kube::Node& n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (desired_text_.empty()) return;
    auto it = n.metadata.annotations.find(std::string(ms::kInventoryAnnotation));
    if (it == n.metadata.annotations.end() || it->second != desired_text_ || !CountMatchesLocked(n)) {
      if (!publish_due_) spdlog::info("event=memshare_node_differs node={} action=patch", opts_.node_name);
      publish_due_ = true;
      cv_.notify_all();
    }
  }

  bool CountMatchesLocked(const kube::Node& n) const {
    if (!config_.gpushare.memory_shares.publish_gpu_count) return true;
    const ms::GpuCount c = ms::CountMemoryGpus(desired_);
    const std::string key(ms::kGpuCountResource);
    auto cap = n.status.capacity.find(key);
    auto alloc = n.status.allocatable.find(key);
    return cap != n.status.capacity.end() && cap->second == std::to_string(c.capacity) &&
           alloc != n.status.allocatable.end() && alloc->second == std::to_string(c.allocatable);
  }

  void Publish() {
    std::string text;
    bool count;
    ms::GpuCount c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      publish_due_ = false;
      text = desired_text_;
      count = config_.gpushare.memory_shares.publish_gpu_count;
      c = ms::CountMemoryGpus(desired_);
    }
    if (text.empty()) return;
    Status st = Status::Ok();
    Result<kube::Node> n = opts_.client->PatchNodeAnnotations(opts_.node_name, {{std::string(ms::kInventoryAnnotation), text}});
    if (!n.ok()) st = n.status();
    if (st.ok() && count) {
      const std::string key(ms::kGpuCountResource);
      nlohmann::json status = {{"capacity", {{key, std::to_string(c.capacity)}}},
                               {"allocatable", {{key, std::to_string(c.allocatable)}}}};
      Result<kube::Node> s = opts_.client->PatchNodeStatus(opts_.node_name, status);
      if (!s.ok()) st = s.status();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok()) {
      publish_backoff_ms_ = publish_backoff_ms_ == 0 ? 500 : std::min<int64_t>(publish_backoff_ms_ * 2, 30000);
      publish_retry_at_ = Clock::now() + std::chrono::milliseconds(publish_backoff_ms_);
      publish_due_ = true;
      spdlog::warn("event=memshare_publish_failed node={} retry_ms={} error={}", opts_.node_name, publish_backoff_ms_,
                   Value(st.message()));
      return;
    }
    publish_backoff_ms_ = 0;
    if (text != published_text_) {
      spdlog::info("event=memshare_published node={} gpus={} memory_gpus={} healthy_memory_gpus={} bytes={}",
                   opts_.node_name, desired_.gpus.size(), c.capacity, c.allocatable, text.size());
    }
    published_text_ = text;
  }

  // ---- reconciliation ---------------------------------------------------------------------
  // Returns when the next reconcile should run.
  Clock::time_point Reconcile() {
    const Clock::time_point now = Clock::now();
    if (!pods_->HasSynced()) return now + std::chrono::milliseconds(100);
    if (now < last_list_ + opts_.min_list_interval) return last_list_ + opts_.min_list_interval;
    last_list_ = now;
    const int64_t list_started_ms = NowMs();
    Result<std::vector<ContainerDevices>> listed = pod_resources_->List(opts_.rpc_timeout);
    if (!listed.ok()) {
      list_backoff_ms_ = listed.status().code() == StatusCode::kResourceExhausted
                             ? std::min<int64_t>(std::max<int64_t>(list_backoff_ms_ * 2, 100), 2000)
                             : std::min<int64_t>(std::max<int64_t>(list_backoff_ms_ * 2, 500), 30000);
      spdlog::warn("event=memshare_pod_resources_failed socket={} retry_ms={} error={}", opts_.pod_resources_socket,
                   list_backoff_ms_, Value(listed.status().message()));
      return Clock::now() + std::chrono::milliseconds(list_backoff_ms_);
    }
    list_backoff_ms_ = 0;

    std::string resource;
    Inventory inventory;
    ms::NodeInventory desired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      resource = resource_name_;
      inventory = inventory_;
      desired = desired_;
    }
    // pod key -> its containers' units of our resource, in the pod's container order.
    std::map<std::string, std::vector<ms::ObservedContainer>> observed;
    for (const ContainerDevices& c : *listed) {
      if (c.resource != resource || c.device_ids.empty()) continue;
      ms::ObservedContainer oc{c.container, c.device_ids};
      std::sort(oc.unit_ids.begin(), oc.unit_ids.end());
      observed[c.pod_namespace + "/" + c.pod_name].push_back(std::move(oc));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      holdings_.Listed(observed, list_started_ms, kUnlistedGraceMs);
    }
    listed_cv_.notify_all();

    bool retry_soon = false;
    int patched = 0, confirmed = 0;
    for (const auto& [key, containers] : observed) {
      std::shared_ptr<const kube::Pod> pod = pods_->Get(key);
      if (!pod) {
        // kubelet knows it and our cache not yet, or it was deleted and kubelet is still
        // tearing it down: look again soon, but only for a while.
        if (++unseen_[key] <= kMaxQuickRetries) retry_soon = true;
        continue;
      }
      unseen_.erase(key);
      Result<ms::PodRequest> req = kube::PodMemRequest(*pod, resource);
      if (!req.ok()) {
        Once("request:" + key, "event=memshare_pod_unreadable pod=" + key + " error=" + Value(req.status().message()));
        continue;
      }
      ms::ActualPlacement actual = ms::ActualGpus(*req, containers, inventory);
      for (const std::string& p : actual.problems) Once("problem:" + key + p, "event=memshare_pod_problem pod=" + key + " problem=" + Value(p));
      if (!actual.complete) {
        retry_soon = true;  // kubelet is still admitting its containers
        continue;
      }
      ++confirmed;
      int64_t dev = -1;
      const std::vector<std::string> owners = req->DemandContainers();
      if (!owners.empty()) {
        if (const ms::InventoryGpu* g = desired.FindByIndex(actual.gpus[owners[0]])) dev = g->units;
      }
      std::map<std::string, std::string> changes =
          ms::ReconcileChanges(pod->metadata.annotations, *req, actual.gpus, dev);
      if (changes.empty()) continue;
      auto w = written_.find(key);
      if (w != written_.end() && w->second.changes == changes &&
          w->second.resource_version == pod->metadata.resource_version) {
        continue;  // written already; the cache has not caught up yet
      }
      ms::PodAssignment before = ms::ResolveAssignment(pod->metadata.annotations, *req);
      kube::AnnotationChanges ac;
      for (const auto& [k, v] : changes) ac[k] = v;
      Result<kube::Pod> r = opts_.client->PatchPodAnnotations(pod->metadata.namespace_, pod->metadata.name, ac);
      if (!r.ok()) {
        spdlog::warn("event=memshare_confirm_failed pod={} error={}", key, Value(r.status().message()));
        retry_soon = true;
        continue;
      }
      ++patched;
      written_[key] = {pod->metadata.resource_version, changes};
      const bool moved = before.state != ms::AssignmentState::kNone && before.gpus != actual.gpus;
      spdlog::info("event=memshare_confirmed pod={} gpus={} assumed={} corrected={}", key,
                   Value(ms::EncodeContainerGpus(actual.gpus)),
                   Value(before.state == ms::AssignmentState::kNone ? std::string("-") : ms::EncodeContainerGpus(before.gpus)),
                   moved ? "true" : "false");
    }
    // Forget what no longer matters: written entries of pods that are gone.
    for (auto it = written_.begin(); it != written_.end();) {
      it = observed.count(it->first) ? std::next(it) : written_.erase(it);
    }
    for (auto it = unseen_.begin(); it != unseen_.end();) {
      it = observed.count(it->first) ? std::next(it) : unseen_.erase(it);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (holdings_.unlisted() > 0) retry_soon = true;  // until a List shows them
    }
    if (patched > 0 || !ready_logged_) {
      spdlog::info("event=memshare_reconciled pods={} confirmed={} patched={}", observed.size(), confirmed, patched);
    }
    if (!ready_logged_) {
      ready_logged_ = true;
      spdlog::info("event=memshare_ready node={}", opts_.node_name);
    }
    return Clock::now() + (retry_soon ? std::chrono::milliseconds(200) : opts_.reconcile_interval);
  }

  void Once(const std::string& key, const std::string& line) {
    if (logged_.insert(key).second) spdlog::warn("{}", line);
    if (logged_.size() > 10000) logged_.clear();
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      if (publish_due_ && now >= publish_retry_at_) {
        lock.unlock();
        Publish();
        lock.lock();
        continue;
      }
      if (now >= reconcile_at_) {
        reconcile_at_ = now + opts_.reconcile_interval;  // an Allocate meanwhile may move it earlier
        lock.unlock();
        Clock::time_point next = Reconcile();
        lock.lock();
        if (next < reconcile_at_) reconcile_at_ = next;
        continue;
      }
      Clock::time_point wake = reconcile_at_;
      if (publish_due_) wake = std::min(wake, publish_retry_at_);
      cv_.wait_until(lock, wake);
    }
  }

  const MemoryShareOptions opts_;
  std::unique_ptr<kube::PodInformer> pods_;
  std::unique_ptr<kube::NodeInformer> nodes_;
  std::unique_ptr<PodResourcesClient> pod_resources_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Inventory inventory_;
  NodeConfig config_;
  std::string resource_name_;
  ms::NodeInventory desired_;
  std::string desired_text_;
  std::string published_text_;
  bool publish_due_ = false;
  int64_t publish_backoff_ms_ = 0;
  Clock::time_point publish_retry_at_{};
  Clock::time_point reconcile_at_ = Clock::now();
  // What kubelet holds: its last PodResources List and the allocations it made since.
  ms::KubeletHoldings holdings_;
  std::condition_variable listed_cv_;  // the first List after the start
  // An allocation a List does not show this long after it is taken as failed.
  static constexpr int64_t kUnlistedGraceMs = 2000;

  // Worker thread only.
  Clock::time_point last_list_{};
  int64_t list_backoff_ms_ = 0;
  std::map<std::string, Written> written_;
  std::map<std::string, int> unseen_;  // pods in PodResources the cache does not have, by rounds
  static constexpr int kMaxQuickRetries = 10;
  std::set<std::string> logged_;
  bool ready_logged_ = false;

  std::thread worker_;  // last
};

}  // namespace

deviceplugin::AllocationDecorator MemoryUnitsDecorator(
    std::function<void(const ms::UnitAllocation&, const std::vector<std::string>& ids)> on_allocate) {
  return [on_allocate](const deviceplugin::ResolvedRequest& r, deviceplugin::ContainerAllocation* a) -> Status {
    if (r.resource == nullptr || !r.resource->is_memory_shares()) return Status::Ok();
    Result<ms::UnitAllocation> u = ms::CheckUnits(*r.resource, r.devices);
    if (!u.ok()) return u.status();
    for (const auto& [k, v] : ms::AllocationEnv(*u)) a->envs[k] = v;
    spdlog::info("event=memshare_allocate gpu={} uuid={} units={} gpu_units={} limit_mib={}", u->gpu, u->gpu_uuid,
                 u->units, u->gpu_units, u->limit_mib);
    if (on_allocate) {
      std::vector<std::string> ids;
      for (const PlannedDevice* d : r.devices) ids.push_back(d->id);
      on_allocate(*u, ids);
    }
    return Status::Ok();
  };
}

deviceplugin::PreferredChooser MemoryUnitsBestFit() {
  return [](const deviceplugin::DeviceIndex& index,
            const deviceplugin::PreferredAllocationQuery& q) -> Result<std::vector<std::string>> {
    Result<ms::UnitChoice> c = ms::ChooseUnits(index.resource(), {q.available, q.must_include, q.allocation_size}, ms::SlotLedger{});
    if (!c.ok()) return c.status();
    return c->ids;
  };
}

Result<std::unique_ptr<MemoryShareMode>> StartMemoryShares(MemoryShareOptions options) {
  if (options.node_name.empty()) {
    return Status::InvalidArgument(
        "--node-name (or NODE_NAME): required when gpushare.memoryShares selects GPUs (the agent publishes the "
        "node's GPUs and reads the pods bound to it)");
  }
  if (!options.client) return Status::InvalidArgument("memory shares: no Kubernetes API client");
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
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig for the API server (memory shares; default $KUBECONFIG, then in-cluster)");
  app.add_option("--pod-resources-socket", flags.pod_resources_socket, "kubelet's PodResources API socket")
      ->capture_default_str();
  app.add_option("--reconcile-interval", flags.reconcile_interval,
                 "how often the PodResources records are compared with the pods' annotations")
      ->capture_default_str();
}

Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig, const std::string& purpose) {
  return MakeApiClient(kubeconfig, purpose, kube::ClientOptions{});
}

Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig, const std::string& purpose,
                                                    const kube::ClientOptions& options) {
  kube::LoadOptions lo;
  lo.kubeconfig = kubeconfig;
  Result<kube::ClientConfig> cfg = kube::LoadClientConfig(lo);
  if (!cfg.ok()) return Status::InvalidArgument(purpose + " need the Kubernetes API: " + cfg.status().message());
  for (const std::string& w : cfg->warnings) spdlog::warn("event=kube_config_warning warning={}", Value(w));
  Result<std::shared_ptr<kube::Client>> client = kube::Client::Create(*cfg, options);
  if (!client.ok()) return Status::InvalidArgument(purpose + ": Kubernetes API client: " + client.status().message());
  spdlog::info("event=kube_config purpose={} source={} server={}", Value(purpose), Value(cfg->source), cfg->server);
  return client;
}

MemoryShareFactory MemoryShareFactoryFromFlags(const MemoryShareFlags& flags) {
  return [flags](const AgentInputs&) -> Result<std::unique_ptr<MemoryShareMode>> {
    MemoryShareOptions o;
    o.node_name = flags.node_name;
    o.pod_resources_socket = flags.pod_resources_socket;
    std::optional<int64_t> ms = ParseDurationMs(flags.reconcile_interval);
    if (!ms || *ms <= 0) {
      return Status::InvalidArgument("--reconcile-interval: must be a positive duration like 10s, got \"" +
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
