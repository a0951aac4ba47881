#include "node/allocation_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <vector>

#include "base/logfmt.h"
#include "config/duration.h"
#include "core/allocation_record.h"
#include "kube/allocation_json.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "node/memshare_service.h"
#include "node/periodic.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using logfmt::Value;

// The recorder: its pod informer, and the round's state (touched by the periodic thread only).
class Recorder final : public Companion {
 public:
  explicit Recorder(AllocationRecorderOptions o) : opts_(std::move(o)) {}
  ~Recorder() override {
    thread_.reset();  // first: no round runs while the informer stops
    if (pods_) pods_->Stop();
  }

  Status Start() {
    kube::InformerOptions po;
    po.field_selector = "spec.nodeName=" + opts_.node_name;
    po.log = [](const std::string& line) {
      spdlog::warn("component=allocations_pod_informer {}", line);
    };
    pods_ = std::make_unique<kube::PodInformer>(opts_.client, po);
    GPUSHARE_RETURN_IF_ERROR(pods_->Start());
    pod_resources_ = std::make_unique<PodResourcesClient>(opts_.pod_resources_socket);
    thread_ =
        std::make_unique<PeriodicThread>([this](int64_t now) { return Round(now); }, opts_.clock);
    spdlog::info("event=allocations_started node={} interval_ms={}", opts_.node_name,
                 opts_.interval.count());
    return Status::Ok();
  }

 private:
  static constexpr int64_t kNotSyncedRetryMs = 500;

  int64_t Round(int64_t now) {
    const int64_t interval = opts_.interval.count();
    Inventory inventory;
    ResourcePlan plan;
    if (!pods_->HasSynced() || !opts_.inputs->Current(&inventory, &plan))
      return now + std::min(interval, kNotSyncedRetryMs);
    Result<std::vector<ContainerDevices>> listed = pod_resources_->List(opts_.rpc_timeout);
    if (!listed.ok()) {
      // A warning for the first failure after a success, then quieter until it works again.
      const auto level = list_delay_ms_ == 0 ? spdlog::level::warn : spdlog::level::debug;
      list_delay_ms_ = list_delay_ms_ == 0 ? 1000 : std::min(interval, list_delay_ms_ * 2);
      spdlog::log(level, "event=allocations_list_failed error={} retry_ms={}",
                  Value(listed.status().message()), list_delay_ms_);
      return now + list_delay_ms_;
    }
    list_delay_ms_ = 0;
    std::vector<alloc::AllocatedDevices> allocated;
    allocated.reserve(listed->size());
    for (ContainerDevices& c : *listed) {
      allocated.push_back({std::move(c.pod_namespace), std::move(c.pod_name),
                           std::move(c.container), std::move(c.resource), std::move(c.device_ids)});
    }
    std::map<std::string, std::string> desired;
    for (const auto& [key, rec] :
         alloc::BuildAllocationRecords(opts_.node_name, plan, inventory, allocated)) {
      desired[key] = kube::EncodeAllocationRecord(rec);
    }
    backoff_.Retain(desired);
    std::vector<alloc::PodState> pods;
    for (const auto& [key, value] : desired) {
      std::shared_ptr<const kube::Pod> p = pods_->Get(key);
      if (!p) continue;  // gone, or not (yet) bound here: skipped
      alloc::PodState s{key, p->metadata.uid, p->spec.node_name, std::nullopt};
      auto it = p->metadata.annotations.find(std::string(alloc::kAllocationsAnnotation));
      if (it != p->metadata.annotations.end()) s.value = it->second;
      pods.push_back(std::move(s));
    }
    bool failed = false;
    for (const alloc::RecordPatch& patch :
         alloc::DecideRecordPatches(opts_.node_name, desired, pods)) {
      if (!backoff_.Allowed(patch.key, now)) {
        failed = true;
        continue;
      }
      if (Patch(patch)) {
        backoff_.Succeeded(patch.key);
      } else {
        backoff_.Failed(patch.key, now);
        failed = true;
      }
    }
    return now + (failed ? std::min<int64_t>(interval, 1000) : interval);
  }

  bool Patch(const alloc::RecordPatch& p) {
    const size_t slash = p.key.find('/');
    nlohmann::json body = {
        {"metadata",
         {{"uid", p.uid},
          {"annotations", {{std::string(alloc::kAllocationsAnnotation), p.value}}}}}};
    Result<nlohmann::json> r = opts_.client->MergePatch(kube::kPods, p.key.substr(0, slash),
                                                        p.key.substr(slash + 1), std::move(body));
    if (!r.ok()) {
      spdlog::warn("event=allocations_patch_failed pod={} uid={} error={}", p.key, p.uid,
                   Value(r.status().message()));
      return false;
    }
    spdlog::info("event=allocations_recorded pod={} uid={} bytes={}", p.key, p.uid, p.value.size());
    return true;
  }

  AllocationRecorderOptions opts_;
  std::unique_ptr<kube::PodInformer> pods_;
  std::unique_ptr<PodResourcesClient> pod_resources_;
  alloc::RecordBackoff backoff_;
  int64_t list_delay_ms_ = 0;
  std::unique_ptr<PeriodicThread> thread_;  // last: its rounds use everything above
};

}  // namespace

void RecorderInputs::Pending(const Inventory& inventory, const ResourcePlan& plan) {
  MutexLock lock(&mu_);
  pending_inventory_ = inventory;
  pending_plan_ = plan;
  has_pending_ = true;
}

void RecorderInputs::Outcome(bool accepted) {
  MutexLock lock(&mu_);
  if (accepted && has_pending_) {
    inventory_ = std::move(pending_inventory_);
    plan_ = std::move(pending_plan_);
    has_current_ = true;
  }
  has_pending_ = false;
}

bool RecorderInputs::Current(Inventory* inventory, ResourcePlan* plan) const {
  MutexLock lock(&mu_);
  if (!has_current_) return false;
  *inventory = inventory_;
  *plan = plan_;
  return true;
}

void FeedRecorderInputs(AgentOptions& agent, std::shared_ptr<RecorderInputs> inputs) {
  agent.load = [load = std::move(agent.load), inputs]() -> Result<AgentInputs> {
    Result<AgentInputs> in = load();
    if (in.ok()) {
      Result<ResourcePlan> plan = BuildResourcePlan(in->inventory, in->config);
      if (plan.ok()) inputs->Pending(in->inventory, *plan);
    }
    return in;
  };
  agent.on_load = [on_load = std::move(agent.on_load), inputs](bool accepted) {
    inputs->Outcome(accepted);
    if (on_load) on_load(accepted);
  };
}

Result<std::unique_ptr<Companion>> StartAllocationRecorder(AllocationRecorderOptions options) {
  if (options.node_name.empty()) return Status::InvalidArgument("allocations: no node name");
  if (!options.client) return Status::InvalidArgument("allocations: no API client");
  if (!options.inputs) return Status::InvalidArgument("allocations: no inputs");
  if (!options.clock) return Status::InvalidArgument("allocations: no clock");
  if (options.interval.count() <= 0) return Status::InvalidArgument("allocations: no interval");
  auto r = std::make_unique<Recorder>(std::move(options));
  GPUSHARE_RETURN_IF_ERROR(r->Start());
  return std::unique_ptr<Companion>(std::move(r));
}

std::unique_ptr<Companion> StartAllocationRecorderFromFlags(
    const MemoryShareFlags& flags, std::shared_ptr<RecorderInputs> inputs) {
  if (flags.node_name.empty()) {
    spdlog::info("event=allocations_disabled reason=no_node_name");
    return nullptr;
  }
  std::optional<int64_t> interval = ParseDurationMs(flags.reconcile_interval);
  Result<std::shared_ptr<kube::Client>> client =
      MakeApiClient(flags.kubeconfig, "recording allocations");
  if (!client.ok() || !interval || *interval <= 0) {
    spdlog::warn("event=allocations_disabled error={}",
                 Value(client.ok() ? "--reconcile-interval: " + flags.reconcile_interval
                                   : client.status().message()));
    return nullptr;
  }
  AllocationRecorderOptions o;
  o.node_name = flags.node_name;
  o.client = std::move(client).value();
  o.pod_resources_socket = flags.pod_resources_socket;
  o.interval = std::chrono::milliseconds(*interval);
  o.inputs = std::move(inputs);
  Result<std::unique_ptr<Companion>> r = StartAllocationRecorder(std::move(o));
  if (!r.ok()) {
    spdlog::warn("event=allocations_disabled error={}", Value(r.status().message()));
    return nullptr;
  }
  return std::move(r).value();
}

}  // namespace gpushare::node
