// AllocationRecorder: writes gpushare.io/allocations (core/allocation_record.h) on every pod of
// this node that holds devices of gpushare's resources, in every sharing mode, from what
// kubelet really allocated (PodResources List) and the node's current resource plan.
// When the plan serves no memory shares it also publishes the node's GPUs as the node
// annotation gpushare.io/gpu-inventory (core/memshare.h; every GPU with its mode, health, model
// and memory), so `gpushare inspect` and the scheduler's reasons see every node's GPUs; in
// memory mode node/memshare_service.h publishes it instead (with the units). The annotation is
// merge-patched when its value changes and again every 10 minutes (a no-op patch when nothing
// changed), failed patches retried after 1 s doubling to the interval.
//
// A companion thread (node/periodic.h) runs one round per --reconcile-interval: List, build the
// records (core), compare them with the pods as a pod informer on spec.nodeName=<node> has them
// and merge-patch the pods whose value differs, with the pod's UID in the patch as the
// precondition (a namesake created meanwhile is not patched). Pods kubelet names that the API
// does not have on this node are skipped; nothing is ever removed; an unchanged value is never
// written again (so an agent restart writes nothing when nothing changed). A failed patch is
// retried with per-pod backoff (1 s doubling to 60 s), a failed List after 1 s doubling to the
// interval. Logs: event=allocations_* key=value lines.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/sync.h"
#include "core/inventory.h"
#include "core/node_config.h"
#include "core/resource_plan.h"
#include "kube/informer.h"
#include "node/agent.h"

namespace gpushare::kube {
class Client;
}

namespace gpushare::node {

struct MemoryShareFlags;

// What the recorder works from: the GPUs, the node config and the plan built from them.
struct RecorderInput {
  Inventory inventory;
  NodeConfig config;
  ResourcePlan plan;
};

// The inputs, handed over by the agent (one of AgentOptions::observers): every plan it adopts
// (a load, a reload, a health change; health applied) replaces them. Thread-safe.
class RecorderInputs final : public AgentObserver {
 public:
  void PlanChanged(const AgentInputs& in, const ResourcePlan& plan) override {
    Set({in.inventory, in.config, plan});
  }
  void Set(RecorderInput input) GPUSHARE_EXCLUDES(mu_);
  // The adopted inputs; false when none yet.
  bool Current(RecorderInput* input) const GPUSHARE_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  bool has_current_ GPUSHARE_GUARDED_BY(mu_) = false;
  RecorderInput current_ GPUSHARE_GUARDED_BY(mu_);
};

struct AllocationRecorderOptions {
  std::string node_name;                 // required
  std::shared_ptr<kube::Client> client;  // required
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds interval{10000};
  std::chrono::milliseconds rpc_timeout{5000};
  std::shared_ptr<RecorderInputs> inputs;  // required
  // The pods of this node (node/node_pods.h), shared with the GPU choices; null: its own.
  std::shared_ptr<kube::PodInformer> pods;
  std::shared_ptr<Clock> clock = RealClock();
};

// Starts the pod informer and the recording thread. kInvalidArgument when an option is missing.
Result<std::unique_ptr<Companion>> StartAllocationRecorder(AllocationRecorderOptions options);

// gpushare-node's wiring: with --node-name (the same flags as memory mode), starts the recorder
// on the API client of --kubeconfig; without a node name, or when no API client can be made,
// logs why and returns null (the device plugins serve as before).
// `pods` (optional) is the node's shared pod informer.
std::unique_ptr<Companion> StartAllocationRecorderFromFlags(
    const MemoryShareFlags& flags, std::shared_ptr<RecorderInputs> inputs,
    std::shared_ptr<kube::PodInformer> pods = nullptr);

}  // namespace gpushare::node
