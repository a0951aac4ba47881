// GPU choices for time-slices, MIG devices and whole GPUs on gpushare-node (docs/node-agent.md,
// "Choosing GPUs"): GetPreferredAllocation of every resource that is not a memory share or a
// fraction advises only devices on GPUs the waiting pods allow (HAMi's nvidia.com/use-gputype,
// nouse-gputype, use-gpuuuid, nouse-gpuuuid; core/gpu_selector.h), by the rules of
// core/gpu_choice.h; the allocation policy then chooses among them as it always does.
//
// Kubelet names no pod in GetPreferredAllocation. The pods that may be asking are those bound
// to this node (the node's pod informer, node/node_pods.h), not running, finished or being
// deleted, with a container whose limit of the resource is the request's size, less those whose
// containers kubelet's PodResources List says already hold the resource (a pod looks Pending in
// the API for a moment after kubelet admitted it). When none is left, the informer has not seen
// the asking pod yet (it and kubelet watch the same bind), and one list of this node's pods from
// the API (a consistent read) stands in. Nothing here blocks kubelet for long: the informer is
// read from memory (waiting for its first list at most sync_wait after a start), the List is
// bounded by rpc_timeout, and when a call fails the advice goes by what is known (logged).
// Logs: event=gpu_choice_* key=value lines.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/gpu_choice.h"
#include "core/inventory.h"
#include "core/node_config.h"
#include "core/status.h"
#include "deviceplugin/preferred_allocation.h"
#include "kube/informer.h"
#include "node/agent.h"

namespace gpushare::node {

struct MemoryShareFlags;

struct GpuChoiceOptions {
  std::string node_name;                 // required
  std::shared_ptr<kube::Client> client;  // required
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds sync_wait{2000};
  std::chrono::milliseconds rpc_timeout{1000};
  // The pods of this node (node/node_pods.h), shared with gpushare.io/allocations; null: its own.
  std::shared_ptr<kube::PodInformer> pods;
};

// Starts the pod informer. kInvalidArgument when an option is missing.
Result<std::shared_ptr<PendingAsks>> StartPendingAsks(GpuChoiceOptions options);

// gpushare-node's wiring: with --node-name and an API client (the flags of memory mode), the
// pods of this node; else null (the advice follows the allocation policy alone), logged.
// `pods` (optional) is the node's shared pod informer.
std::shared_ptr<PendingAsks> StartPendingAsksFromFlags(
    const MemoryShareFlags& flags, std::shared_ptr<kube::PodInformer> pods = nullptr);

// GetPreferredAllocation for a resource that is not a memory share: the devices
// core/gpu_choice.h allows, then `policy`. `inventory` gives each GPU's model.
deviceplugin::PreferredChooser GpuChoiceChooser(Inventory inventory, AllocationPolicy policy,
                                                std::shared_ptr<PendingAsks> asks);

}  // namespace gpushare::node
