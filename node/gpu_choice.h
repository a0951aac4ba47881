// GPU choices for time-slices, MIG devices and whole GPUs on gpushare-node (docs/node-agent.md,
// "Choosing GPUs"): GetPreferredAllocation of every resource that is not a memory share or a
// fraction advises only devices on GPUs the waiting pods allow (HAMi's nvidia.com/use-gputype,
// nouse-gputype, use-gpuuuid, nouse-gpuuuid; core/gpu_selector.h), by the rules of
// core/gpu_choice.h; the allocation policy then chooses among them as it always does.
//
// Kubelet names no pod in GetPreferredAllocation. The pods that may be asking are those bound
// to this node (a pod informer on spec.nodeName), not running, finished or being deleted, with a
// container whose limit of the resource is the request's size; when several could be and any of
// them names GPUs, kubelet's PodResources List drops those whose containers already hold the
// resource. Nothing here blocks kubelet for long: the informer is read from memory (waiting
// for its first list at most sync_wait after a start), the List is bounded by rpc_timeout, and
// when either fails the advice goes by the pods the informer has (a log line says so).
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
#include "node/agent.h"

namespace gpushare::kube {
class Client;
}

namespace gpushare::node {

struct MemoryShareFlags;

struct GpuChoiceOptions {
  std::string node_name;                 // required
  std::shared_ptr<kube::Client> client;  // required
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds sync_wait{2000};
  std::chrono::milliseconds rpc_timeout{1000};
};

// Starts the pod informer. kInvalidArgument when an option is missing.
Result<std::shared_ptr<PendingAsks>> StartPendingAsks(GpuChoiceOptions options);

// gpushare-node's wiring: with --node-name and an API client (the flags of memory mode), the
// pods of this node; else null (the advice follows the allocation policy alone), logged.
std::shared_ptr<PendingAsks> StartPendingAsksFromFlags(const MemoryShareFlags& flags);

// GetPreferredAllocation for a resource that is not a memory share: the devices
// core/gpu_choice.h allows, then `policy`. `inventory` gives each GPU's model.
deviceplugin::PreferredChooser GpuChoiceChooser(Inventory inventory, AllocationPolicy policy,
                                                std::shared_ptr<PendingAsks> asks);

}  // namespace gpushare::node
