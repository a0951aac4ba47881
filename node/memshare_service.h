// MemoryShareService: gpushare-node's memory mode (gpushare.memoryShares, aliyun.com/gpu-mem).
//
// The pure decisions are in core/: memshare_node.h (what to publish, which units, the one-GPU
// check), memshare_reconcile.h (the reconciler's observe step) and memshare_timing.h (when to
// publish and List, on MemoryShareOptions::clock); this part does the I/O around them:
//   - publishes the node's GPUs as the node annotation gpushare.io/gpu-inventory (merge patch)
//     and aliyun.com/gpu-count in the node's status capacity/allocatable, again whenever the
//     plan or a GPU's health changes, and whenever the Node object stops saying it (a node
//     informer on metadata.name=<node>);
//   - GetPreferredAllocation: a GPU with an open slot of the request's size
//   (core/memshare_ledger.h:
//     the plans of the pods bound here, from a pod informer on spec.nodeName=<node>, minus what
//     kubelet holds; one fresh list from the API when no pending pod asks that size), so that
//     whatever order kubelet admits identical pods in, the GPUs fill as the scheduler planned;
//   - Allocate: refuses units of several GPUs, adds ALIYUN_COM_GPU_MEM_IDX/_POD/_CONTAINER/_DEV
//     (the memory limit itself comes from the units through the interposer contract), records
//     the units as held and asks for a reconcile; the container's compute share (the SM limit)
//     is that of the slot the units were advised for;
//   - the reconciler: kubelet's PodResources List (periodically, and shortly after every
//     Allocate; client-side paced, and backing off when kubelet's rate limit refuses) says
//     which units each container holds; every pod whose annotations say otherwise is patched
//     with the truth (ALIYUN_COM_GPU_MEM_ASSIGNED=true, the real GPU, the confirmed map).
// State that matters lives in the API (annotations) and in kubelet (PodResources): after a
// restart the first List rebuilds everything, and GetPreferredAllocation waits for it. The only
// memory-only state is the allocations kubelet made since the last List.
// Logs: event=memshare_* key=value lines.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/memshare_node.h"
#include "core/status.h"
#include "node/agent.h"

namespace CLI {
class App;
}

namespace gpushare::kube {
class Client;
struct ClientOptions;
}  // namespace gpushare::kube

namespace gpushare::node {

inline constexpr const char* kDefaultPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

struct MemoryShareOptions {
  std::string node_name;                 // required
  std::shared_ptr<kube::Client> client;  // required
  std::string pod_resources_socket = kDefaultPodResourcesSocket;
  std::chrono::milliseconds reconcile_interval{10000};  // periodic PodResources List
  std::chrono::milliseconds after_allocate{50};         // a List this long after an Allocate
  std::chrono::milliseconds min_list_interval{50};      // pacing (kubelet allows 100/s, burst 10)
  std::chrono::milliseconds sync_wait{5000};    // GetPreferredAllocation waits for the pod cache
  std::chrono::milliseconds rpc_timeout{5000};  // PodResources calls
  // The time the worker's schedule (core/memshare_timing.h) runs on (tests: a SimulatedClock).
  std::shared_ptr<Clock> clock = RealClock();
  // Optional: told about every correction the reconciler writes (kind "assignment": a pod's
  // assumed GPUs differed from what kubelet allocated). Called on the worker thread.
  std::function<void(std::string_view kind)> on_correction;
};

// The parts of memory mode that need no API: Allocate's one-GPU check and environment (with
// `on_allocate`, if set, called after each success; what it returns is the container's compute
// share in percent, ContainerAllocation::sm_limit_percent), and GetPreferredAllocation by best
// fit (units of one GPU, the fullest that has room). The agent uses them for a memory-share
// resource whenever no MemoryShareMode runs, so a container never gets units of two GPUs.
deviceplugin::AllocationDecorator MemoryUnitsDecorator(
    std::function<int64_t(const memshare::UnitAllocation& allocation,
                          const std::vector<std::string>& unit_ids)>
        on_allocate = nullptr);
deviceplugin::PreferredChooser MemoryUnitsBestFit();

// Starts the informers and the worker thread. Errors: options missing (kInvalidArgument).
Result<std::unique_ptr<MemoryShareMode>> StartMemoryShares(MemoryShareOptions options);

// The flags of memory mode (registered by node::AddServeFlags).
struct MemoryShareFlags {
  std::string node_name;   // --node-name, $NODE_NAME
  std::string kubeconfig;  // --kubeconfig ($KUBECONFIG, then in-cluster, then ~/.kube/config)
  std::string pod_resources_socket = kDefaultPodResourcesSocket;  // --pod-resources-socket
  std::string reconcile_interval = "10s";                         // --reconcile-interval
};

void AddMemoryShareFlags(CLI::App& app, MemoryShareFlags& flags);

// A client of the API server from --kubeconfig (empty: $KUBECONFIG, then in-cluster, then
// ~/.kube/config). `purpose` ("memory shares", "--config-dir") starts the messages.
// kInvalidArgument (exit 2) for an unusable configuration.
Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig,
                                                    const std::string& purpose,
                                                    const kube::ClientOptions& options);
Result<std::shared_ptr<kube::Client>> MakeApiClient(const std::string& kubeconfig,
                                                    const std::string& purpose);

// For AgentOptions::memory_shares: checks the flags, loads the API client configuration and
// starts the service. kInvalidArgument (exit 2) for a missing node name, a bad duration or an
// unusable kubeconfig.
MemoryShareFactory MemoryShareFactoryFromFlags(
    const MemoryShareFlags& flags, std::function<void(std::string_view kind)> on_correction = {});

}  // namespace gpushare::node
