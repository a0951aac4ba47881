#include "node/allocation_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "base/logfmt.h"
#include "config/duration.h"
#include "core/allocation_json.h"
#include "core/allocation_record.h"
#include "core/memshare.h"
#include "core/memshare_node.h"
#include "core/object_key.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "node/memshare_service.h"
#include "node/node_pods.h"
#include "node/periodic.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using logfmt::Value;
namespace ms = memshare;

// The recorder: its pod informer, and the round's state (touched by the periodic thread only).
class Recorder final : public Companion {
 public:
  explicit Recorder(AllocationRecorderOptions o) : opts_(std::move(o)) {}
  ~Recorder() override {
    thread_.reset();  // first: no round runs while the informer goes
  }

  Status Start() {
    if (opts_.pods) {
      pods_ = opts_.pods;
    } else {
      GPUSHARE_ASSIGN_OR_RETURN(pods_, StartNodePods(opts_.client, opts_.node_name));
    }
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
    RecorderInput in;
    if (!opts_.inputs->Current(&in))
      return now + std::min(opts_.interval.count(), kNotSyncedRetryMs);
    const int64_t inventory_at = PublishInventory(in, now);
    return std::min(inventory_at, RecordAllocations(in, now));
  }

  // ---- gpushare.io/gpu-inventory, when memory mode does not publish it ----------------------
  static constexpr int64_t kRepublishMs = 10 * 60 * 1000;
  static constexpr int64_t kNever = INT64_MAX;

  int64_t PublishInventory(const RecorderInput& in, int64_t now) {
    if (ms::FindMemoryResource(in.plan) != nullptr) {  // node/memshare_service.h publishes it
      published_.clear();
      return kNever;
    }
    std::string text =
        ms::EncodeInventory(ms::BuildNodeInventory(in.inventory, in.config, in.plan));
    if (text == published_ && now < republish_at_) return republish_at_;
    if (now < inventory_retry_at_) return inventory_retry_at_;
    Result<kube::Node> r = opts_.client->PatchNodeAnnotations(
        opts_.node_name, {{std::string(ms::kInventoryAnnotation), text}});
    if (!r.ok()) {
      inventory_delay_ms_ = inventory_delay_ms_ == 0
                                ? 1000
                                : std::min(opts_.interval.count(), inventory_delay_ms_ * 2);
      inventory_retry_at_ = now + inventory_delay_ms_;
      spdlog::warn("event=inventory_publish_failed node={} retry_ms={} error={}", opts_.node_name,
                   inventory_delay_ms_, Value(r.status().message()));
      return inventory_retry_at_;
    }
    inventory_delay_ms_ = 0;
    if (text != published_) {
      spdlog::info("event=inventory_published node={} gpus={} bytes={}", opts_.node_name,
                   in.inventory.gpus.size(), text.size());
    }
    published_ = std::move(text);
    republish_at_ = now + kRepublishMs;
    return republish_at_;
  }

  // ---- gpushare.io/allocations --------------------------------------------------------------
  int64_t RecordAllocations(const RecorderInput& in, int64_t now) {
    const int64_t interval = opts_.interval.count();
    if (!pods_->HasSynced()) return now + std::min(interval, kNotSyncedRetryMs);
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
         alloc::BuildAllocationRecords(opts_.node_name, in.plan, in.inventory, allocated)) {
      desired[key] = alloc::EncodeAllocationRecord(rec);
    }
    backoff_.Retain(desired);
    writes_.Retain(desired);
    std::vector<alloc::PodState> pods;
    for (const auto& [key, value] : desired) {
      std::shared_ptr<const kube::Pod> p = pods_->Get(key);
      if (!p) continue;  // gone, or not (yet) bound here: skipped
      alloc::PodState s{key, p->metadata.uid, p->spec.node_name, std::nullopt,
                        p->metadata.resource_version};
      auto it = p->metadata.annotations.find(std::string(alloc::kAllocationsAnnotation));
      if (it != p->metadata.annotations.end()) s.value = it->second;
      pods.push_back(writes_.Current(std::move(s)));
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
        writes_.Wrote(patch);
      } else {
        backoff_.Failed(patch.key, now);
        failed = true;
      }
    }
    return now + (failed ? std::min<int64_t>(interval, 1000) : interval);
  }

  bool Patch(const alloc::RecordPatch& p) {
    Result<kube::Pod> r = opts_.client->PatchPodAnnotations(
        ObjectKey::Of(p.key), {{std::string(alloc::kAllocationsAnnotation), p.value}},
        kube::PatchOptions::IfUid(p.uid));
    if (!r.ok()) {
      spdlog::warn("event=allocations_patch_failed pod={} uid={} error={}", p.key, p.uid,
                   Value(r.status().message()));
      return false;
    }
    spdlog::info("event=allocations_recorded pod={} uid={} bytes={}", p.key, p.uid, p.value.size());
    return true;
  }

  AllocationRecorderOptions opts_;
  std::shared_ptr<kube::PodInformer> pods_;
  std::unique_ptr<PodResourcesClient> pod_resources_;
  alloc::RecordBackoff backoff_;
  alloc::RecordWrites writes_;  // patched, maybe not yet in pods_
  int64_t list_delay_ms_ = 0;
  std::string published_;  // the inventory annotation as last patched
  int64_t republish_at_ = 0;
  int64_t inventory_retry_at_ = 0;
  int64_t inventory_delay_ms_ = 0;
  std::unique_ptr<PeriodicThread> thread_;  // last: its rounds use everything above
};

}  // namespace

void RecorderInputs::Set(RecorderInput input) {
  MutexLock lock(&mu_);
  current_ = std::move(input);
  has_current_ = true;
}

bool RecorderInputs::Current(RecorderInput* input) const {
  MutexLock lock(&mu_);
  if (!has_current_) return false;
  *input = current_;
  return true;
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
    const MemoryShareFlags& flags, std::shared_ptr<RecorderInputs> inputs,
    std::shared_ptr<kube::PodInformer> pods) {
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
  o.pods = std::move(pods);
  Result<std::unique_ptr<Companion>> r = StartAllocationRecorder(std::move(o));
  if (!r.ok()) {
    spdlog::warn("event=allocations_disabled error={}", Value(r.status().message()));
    return nullptr;
  }
  return std::move(r).value();
}

}  // namespace gpushare::node
