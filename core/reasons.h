// reasons.h: the stable reason codes gpushare gives when it refuses or fails something.
//
// One vocabulary for three audiences: the `reason` of the Kubernetes Events gpushare records
// on pods (kubectl describe pod), the `reason` label of the refusal and failure counters in
// both daemons' /metrics, and the reasons `gpushare inspect` shows for pending pods. A code is
// UpperCamelCase (as Kubernetes' own event reasons are), never renamed once released, and says
// WHAT was missing; the message beside it says WHICH GPU lacked what.
//
// Add a code here (in its section, with one line of meaning) rather than spelling a string at
// the call site; docs/observability.md lists them for operators.
#pragma once

#include <string>
#include <string_view>

namespace gpushare::reasons {

// A refusal's message as gpushare sends it to a caller that shows only the message (kubelet
// puts a refused Allocate's into the pod's UnexpectedAdmissionError): the code first,
// "GpuUnhealthy: <message>". gpushare-node also matches a failed pod's status.message against it.
inline std::string Coded(std::string_view reason, std::string_view message) {
  std::string s(reason);
  s += ": ";
  s += message;
  return s;
}

// --- placement (gpushare-scheduler's filter, and `gpushare inspect` for pending pods) ---
// The node has no GPU that gpushare places memory shares on.
inline constexpr std::string_view kNoSharedGpu = "NoSharedGpu";
// No single GPU of the node has enough free memory for the (largest) container's request.
inline constexpr std::string_view kGpuMemoryInsufficient = "GpuMemoryInsufficient";
// Each container fits some GPU alone, but not all of the pod's containers at once.
inline constexpr std::string_view kNoGpuFitsContainer = "NoGpuFitsContainer";
// Every GPU with room already serves maxClientsPerGpu containers.
inline constexpr std::string_view kClientCeilingReached = "ClientCeilingReached";
// The GPUs that would fit are unhealthy (an XID, or gone from the inventory).
inline constexpr std::string_view kGpuUnhealthy = "GpuUnhealthy";
// The pod's GPU choice (nvidia.com/use-gputype, nouse-gputype, use-gpuuuid, nouse-gpuuuid)
// excludes every GPU of the node that serves shares.
inline constexpr std::string_view kGpuExcluded = "GpuExcluded";
// Every GPU of the node the pod may use has less of its compute left than the pod's compute
// share (aliyun.com/gpu-core.percentage, nvidia.com/gpucores): each GPU's shares sum to <= 100 %.
inline constexpr std::string_view kGpuComputeFull = "GpuComputeFull";
// The scheduler does not know the node (not in its cache, or no inventory published yet).
inline constexpr std::string_view kNodeUnknown = "NodeUnknown";
// The pod's request is not a valid memory share (bad quantity, mixed with whole GPUs, ...).
inline constexpr std::string_view kInvalidRequest = "InvalidRequest";
// gpushare-scheduler started recently and takes no new shares on the node until the pods bound
// there before its start are confirmed by gpushare-node (or the hold times out).
inline constexpr std::string_view kNodeHeldBack = "NodeHeldBack";
// The pod would take a slot that a pod still waiting for gpushare-node's confirmation may hold
// (identical pods admitted in another order); it fits once that pod is confirmed.
inline constexpr std::string_view kPendingSlotConflict = "PendingSlotConflict";
// gpushare-scheduler has not read every node and pod from the API server yet.
inline constexpr std::string_view kSchedulerNotReady = "SchedulerNotReady";

// --- preemption (gpushare-scheduler's preempt) ---
// kube-scheduler would evict pods for the pod, but on no node would evicting lower-priority pods
// free one GPU enough (or only by breaking a PodDisruptionBudget): nothing is evicted.
inline constexpr std::string_view kPreemptionNotHelpful = "PreemptionNotHelpful";

// --- binding (gpushare-scheduler's bind) ---
// The GPU chosen at filter time was taken meanwhile; the pod goes back to the queue.
inline constexpr std::string_view kBindConflict = "BindConflict";
// The pod named in the bind request is gone, or is another pod now (UID differs).
inline constexpr std::string_view kBindPodChanged = "BindPodChanged";
// The API server refused or failed the annotation patch or the Binding.
inline constexpr std::string_view kBindApiError = "BindApiError";
// An assumed placement was never confirmed by the node in time and was released.
inline constexpr std::string_view kAssumeExpired = "AssumeExpired";

// --- the node (gpushare-node's Allocate) ---
// kubelet asked for a device ID this node does not advertise (any more).
inline constexpr std::string_view kUnknownDevice = "UnknownDevice";
// Preparing the container's interposer files (config, region, library) failed.
inline constexpr std::string_view kInterposerSetupFailed = "InterposerSetupFailed";
// The device nodes a container needs cannot be given (e.g. the nvidia-caps minors of a MIG
// device are unknown with passDeviceSpecs).
inline constexpr std::string_view kDeviceNodesUnavailable = "DeviceNodesUnavailable";
// (kGpuUnhealthy and kInvalidRequest above are also Allocate's: a device kubelet asked for is
// Unhealthy now; a request the resource does not accept, e.g. two replicas with
// failRequestsGreaterThanOne.)

// Every code above, for readers that must recognise one (gpushare inspect's pending reasons).
inline constexpr std::string_view kAll[] = {
    kNoSharedGpu,           kGpuMemoryInsufficient,  kNoGpuFitsContainer,
    kClientCeilingReached,  kGpuUnhealthy,           kNodeUnknown,
    kInvalidRequest,        kNodeHeldBack,           kPendingSlotConflict,
    kSchedulerNotReady,     kBindConflict,           kBindPodChanged,
    kBindApiError,          kAssumeExpired,          kUnknownDevice,
    kInterposerSetupFailed, kDeviceNodesUnavailable, kPreemptionNotHelpful,
    kGpuExcluded,           kGpuComputeFull,
};

}  // namespace gpushare::reasons
