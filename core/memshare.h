// Memory shares (`aliyun.com/gpu-mem`): the contract between gpushare-scheduler and gpushare-node.
//
// The two binaries never talk to each other; they cooperate through the Kubernetes API. This
// header is the one place that defines what they write there and how to read it back, as pure
// functions (no I/O, no clocks): the scheduler encodes its decision into pod annotations, the
// node agent publishes its GPUs as a node annotation and confirms what kubelet really did.
// docs/memory-shares.md explains the protocol; the summary:
//
//   node annotation  gpushare.io/gpu-inventory   JSON, written by gpushare-node (every mode; only
//                    memory mode GPUs have units):
//                    {"version":1,"unit":"GiB","maxClientsPerGpu":48,"gpus":[{"index":0,
//                     "uuid":"GPU-...","model":"NVIDIA A10","memoryMiB":24564,"units":23,
//                     "health":"Healthy","mode":"memory"}]}
//   pod annotations  written by gpushare-scheduler at bind (Alibaba's keys kept for tools):
//                    ALIYUN_COM_GPU_MEM_IDX=<GPU index of the first GPU container>
//                    ALIYUN_COM_GPU_MEM_POD=<units of the whole pod>
//                    ALIYUN_COM_GPU_MEM_DEV=<units of that GPU>
//                    ALIYUN_COM_GPU_MEM_ASSIGNED=false
//                    ALIYUN_COM_GPU_MEM_ASSUME_TIME=<UnixNano>
//                    gpushare.io/gpu-mem-assumed={"<container>":<GPU index>,...}
//                    and by gpushare-node once kubelet's PodResources API shows the units:
//                    ALIYUN_COM_GPU_MEM_ASSIGNED=true, ALIYUN_COM_GPU_MEM_IDX=<real GPU>,
//                    gpushare.io/gpu-mem-confirmed={"<container>":<GPU index>,...}
//   device IDs       "<GPU-uuid>-_-<j>", j = 0 .. units-1 (Alibaba's form): a unit names its GPU.
//
// Requests: a container's units are its limit (else its request) of aliyun.com/gpu-mem;
// containers without the resource (Knative's queue-proxy) take no part. Init containers run
// before the app containers, on the GPU of the first app container that asks for units.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_selector.h"
#include "core/status.h"

namespace gpushare::memshare {

// --- names ---------------------------------------------------------------------------------

inline constexpr std::string_view kResourceName = "aliyun.com/gpu-mem";
inline constexpr std::string_view kGpuCountResource = "aliyun.com/gpu-count";

// Fractions and whole GPUs on memory-share GPUs, in the names of Alibaba's PAI cluster (the
// source of the trace gpushare simulate replays): a container asks `alibabacloud.com/gpu-milli`
// M, 1..999 for that fraction of one GPU, k x 1000 for k whole GPUs. The engine places them on
// the same GPUs as aliyun.com/gpu-mem shares. docs/memory-shares.md ("Fractions and whole GPUs").
inline constexpr std::string_view kMilliResource = "alibabacloud.com/gpu-milli";
inline constexpr std::string_view kGpuCountAnnotation = "alibabacloud.com/gpu-count";
inline constexpr int64_t kMilliPerGpu = 1000;
inline constexpr int kMaxWholeGpusPerContainer = 16;

// A compute share: the percent of one GPU's compute (the in-container library's SM limit,
// docs/interposer.md) a container with a memory share or a fraction may use, asked as ACK's
// `aliyun.com/gpu-core.percentage` or HAMi's `nvidia.com/gpucores` (1..100; the two, when both
// are given, must agree). gpushare-scheduler keeps each GPU's compute shares at or below 100 as
// it keeps its memory; gpushare-node sets the container's SM limit. Neither is advertised by a
// node: kube-scheduler leaves them to the extender (managedResources, ignoredByScheduler) and
// kubelet admits extended resources no node advertises. docs/memory-shares.md ("Compute shares").
inline constexpr std::string_view kCoreResource = "aliyun.com/gpu-core.percentage";
inline constexpr std::string_view kHamiCoreResource = "nvidia.com/gpucores";
inline constexpr int64_t kMaxCorePercent = 100;

// Whether `milli` (a count of alibabacloud.com/gpu-milli) is whole GPUs: a positive multiple of
// 1000. Fractions are 1..999.
inline bool AsksWholeGpus(int64_t milli) {
  return milli >= kMilliPerGpu && milli % kMilliPerGpu == 0;
}
// `milli` thousandths of a GPU's `memory_mib`, rounded down: a fraction's memory limit.
inline int64_t MilliOfMemoryMiB(int64_t milli, int64_t memory_mib) {
  return milli * memory_mib / kMilliPerGpu;
}

// gpushare's own annotation keys all start with this prefix (chosen once; see the doc).
inline constexpr std::string_view kAnnotationPrefix = "gpushare.io/";
inline constexpr std::string_view kInventoryAnnotation = "gpushare.io/gpu-inventory";      // node
inline constexpr std::string_view kAssumedAnnotation = "gpushare.io/gpu-mem-assumed";      // pod
inline constexpr std::string_view kConfirmedAnnotation = "gpushare.io/gpu-mem-confirmed";  // pod

// Alibaba gpushare's pod annotation keys (also the environment variable names Allocate sets).
inline constexpr std::string_view kIdxKey = "ALIYUN_COM_GPU_MEM_IDX";
inline constexpr std::string_view kPodKey = "ALIYUN_COM_GPU_MEM_POD";
inline constexpr std::string_view kDevKey = "ALIYUN_COM_GPU_MEM_DEV";
inline constexpr std::string_view kAssignedKey = "ALIYUN_COM_GPU_MEM_ASSIGNED";
inline constexpr std::string_view kAssumeTimeKey = "ALIYUN_COM_GPU_MEM_ASSUME_TIME";
inline constexpr std::string_view kContainerEnv = "ALIYUN_COM_GPU_MEM_CONTAINER";  // env only

// The pod annotations of ACK's later GPU-sharing scheduler (Alibaba Cloud; the keys and the JSON
// below as Alibaba's public Go sources define and read them: kubeflow/arena, koordinator's ACK
// plugin), which ACK-era tooling reads where the ALIYUN_COM_GPU_MEM_* ones are not enough (a pod
// on several GPUs, each container's own GPU):
//   scheduler.framework.gpushare.allocation   {"<container index>":{"<GPU index>":<units>}}
//   scheduler.framework.gpushare.assigned     "false" at bind, "true" once the node confirmed
//   scheduler.framework.gpushare.assume-time  UnixNano of the bind, as
//   ALIYUN_COM_GPU_MEM_ASSUME_TIME
// The container index is the container's position in spec.containers (app containers only).
inline constexpr std::string_view kAckAllocationKey = "scheduler.framework.gpushare.allocation";
inline constexpr std::string_view kAckAssignedKey = "scheduler.framework.gpushare.assigned";
inline constexpr std::string_view kAckAssumeTimeKey = "scheduler.framework.gpushare.assume-time";

// The inventory format this code writes and reads.
inline constexpr int kInventoryVersion = 1;
// A GPU whose `mode` is this serves memory shares; any other mode is skipped by the scheduler.
inline constexpr std::string_view kMemoryMode = "memory";

// --- units ---------------------------------------------------------------------------------

// What one aliyun.com/gpu-mem unit is. GiB is the default (Alibaba's too).
enum class MemoryUnit { kGiB, kMiB };

std::string_view MemoryUnitName(MemoryUnit u);                  // "GiB", "MiB"
std::optional<MemoryUnit> ParseMemoryUnit(std::string_view s);  // exactly "GiB" or "MiB"
int64_t UnitMiB(MemoryUnit u);                                  // 1024 or 1
// Units a GPU of `memory_mib` advertises: its memory rounded down to whole units.
int64_t UnitsForMemory(int64_t memory_mib, MemoryUnit u);

// --- device IDs ----------------------------------------------------------------------------

inline constexpr std::string_view kUnitIdSeparator = "-_-";

// "<gpu_uuid>-_-<j>": unit j of aliyun.com/gpu-mem.
std::string UnitDeviceId(std::string_view gpu_uuid, int64_t j);
// "<gpu_uuid>-_-m<j>": milli j (0..999) of alibabacloud.com/gpu-milli, the fractions' resource
// gpushare-node advertises beside the memory units (1,000 devices per memory-share GPU).
std::string MilliDeviceId(std::string_view gpu_uuid, int64_t j);

struct UnitId {
  std::string gpu_uuid;
  int64_t j = 0;
  bool milli = false;  // "-_-m<j>"
};
// Splits at the last "-_-"; the UUID part must be non-empty and j a non-negative decimal
// without leading zeros, after an "m" for a milli device. The error names the ID and what is
// wrong.
Result<UnitId> ParseUnitDeviceId(std::string_view id);

// --- node inventory ------------------------------------------------------------------------

struct InventoryGpu {
  int index = 0;                                // NVML index
  std::string uuid;                             // "GPU-..."
  std::string model;                            // product name, e.g. "NVIDIA A10"
  int64_t memory_mib = 0;                       // total framebuffer memory
  int64_t units = 0;                            // aliyun.com/gpu-mem units this GPU advertises
  bool healthy = true;                          // "health": "Healthy" | "Unhealthy"
  std::string mode = std::string(kMemoryMode);  // "memory", or what else the GPU serves
                                                // ("exclusive", "time-slicing", "mig", ...)

  bool ServesMemoryShares() const { return healthy && mode == kMemoryMode && units > 0; }
};

struct NodeInventory {
  int version = kInventoryVersion;
  MemoryUnit unit = MemoryUnit::kGiB;
  int max_clients_per_gpu = 48;    // containers that may share one GPU
  std::vector<InventoryGpu> gpus;  // in index order

  const InventoryGpu* FindByIndex(int index) const;
  const InventoryGpu* FindByUuid(std::string_view uuid) const;
};

// The units of each GPU serving memory shares (InventoryGpu::ServesMemoryShares) when they all
// have the same, else 0 (also without any): the size alibabacloud.com/gpu-milli resolves
// against on this node (PodRequest::Resolve).
int64_t UniformShareUnits(const NodeInventory& inv);

// Compact JSON, keys in a fixed order (so an unchanged inventory encodes to the same bytes and
// the agent can skip the patch).
std::string EncodeInventory(const NodeInventory& inv);
// Strict where it matters (types, ranges, duplicate indices or UUIDs, a version newer than
// kInventoryVersion), tolerant of unknown keys (a newer agent may add fields). Errors name the
// field, e.g. `gpus[2].units: must be a non-negative integer, got "x"`.
Result<NodeInventory> DecodeInventory(std::string_view json);

// --- requests ------------------------------------------------------------------------------

// One container's aliyun.com/gpu-mem quantities, already parsed into whole units by the
// adapter (kube/memshare_pod.h does it for a kube::Pod).
struct ContainerUnits {
  std::string name;
  bool init = false;
  std::optional<int64_t> limit;
  std::optional<int64_t> request;
  std::optional<int64_t> milli_limit;  // alibabacloud.com/gpu-milli
  std::optional<int64_t> milli_request;
  std::optional<int64_t> core_limit;  // aliyun.com/gpu-core.percentage
  std::optional<int64_t> core_request;
  std::optional<int64_t> hami_core_limit;  // nvidia.com/gpucores
  std::optional<int64_t> hami_core_request;
};

// One demand: `units` of one GPU. A container asking alibabacloud.com/gpu-milli has `milli` set
// and no units until the request is resolved against a node's GPUs (PodRequest::Resolve); then
// a fraction holds ceil(milli x units per GPU / 1000) units and each whole GPU is one demand
// holding all of its GPU (`whole`), the second and later ones named WholeGpuSlotName(c, i).
struct ContainerShare {
  std::string name;
  int64_t units = 0;
  int64_t milli = 0;   // as asked: 1..999 a fraction, k x 1000 k whole GPUs; 0 for gpu-mem
  bool whole = false;  // a whole GPU (resolved)
  int index = -1;      // the container's position in spec.containers (or spec.initContainers)
  int64_t core = 0;    // its compute share in percent of the GPU (1..100), 0 for none
};

// "<container>/<i>": the i-th (i >= 1) whole GPU of a container asking several. A container
// name never holds '/', so these names cannot collide with a container's.
std::string WholeGpuSlotName(std::string_view container, int i);
// The container a demand name belongs to ("main/2" -> "main", "main" -> "main").
std::string_view SlotContainer(std::string_view slot);

// What a pod asks for. Containers without units are left out.
struct PodRequest {
  std::vector<ContainerShare> init;  // init containers with units, in spec order
  std::vector<ContainerShare> app;   // app containers with units, in spec order
  // The GPUs the pod may use (its nvidia.com/use-gputype ... annotations; empty: any). Set by the
  // adapter (kube/memshare_pod.h), kept by Resolve and InMilliUnits.
  GpuSelector selector;

  bool empty() const { return init.empty() && app.empty(); }
  // Asks alibabacloud.com/gpu-milli (then only that: ComputePodRequest refuses a mix).
  bool milli() const { return !app.empty() && app.front().milli > 0; }
  // The compute shares of the app containers, summed (0: the pod asks none).
  int64_t CoreSum() const;
  // Asked in milli and not yet resolved against a node.
  bool unresolved() const { return milli() && app.front().units == 0; }
  // The request on a node whose memory-share GPUs have `gpu_units` units each: fractions in
  // units (rounded up, so that fractions summing to at most one GPU always fit it) and whole
  // GPUs as one demand each. A request without milli is returned as is. Errors: gpu_units <= 0.
  Result<PodRequest> Resolve(int64_t gpu_units) const;
  // The resolved request in thousandths of the node's unit, exact for fractions: a fraction is
  // its milli x `gpu_units` (the GPU size it was resolved against: milli/1000 of the GPU), every
  // other demand its units x 1000. What gpushare-scheduler counts GPUs in, so that fractions
  // summing to one GPU fill it exactly (Resolve's rounded units would over-count them). With
  // gpu_units <= 0 a fraction keeps its rounded units (x 1000).
  PodRequest InMilliUnits(int64_t gpu_units) const;
  // Demands() with each whole GPU as its negative units: what tells apart, for the engine's
  // workload, a whole GPU from a share that happens to fill it.
  std::vector<int64_t> ShapeKey() const;
  // ALIYUN_COM_GPU_MEM_POD: the units of the app containers (Alibaba: the sum of the limits).
  int64_t PodUnits() const;
  int64_t MaxInitUnits() const;
  // The placement demands: one per app container, in order; the first is raised to the
  // largest init container (init containers run first, on the first app container's GPU, and
  // kubelet keeps their units for the pod). Only init containers: one demand, the largest.
  std::vector<int64_t> Demands() const;
  // The container each demand belongs to (the first app container, or the first init one).
  std::vector<std::string> DemandContainers() const;
};

// Per container: the limit wins; without a limit, the request; absent or 0: no share. A
// negative value, or a request that differs from the limit (the API server refuses such pods;
// extended resources are not overcommitted), is an error naming the container. Duplicate
// container names are an error. alibabacloud.com/gpu-milli: 1..999 or a multiple of 1000 up to
// kMaxWholeGpusPerContainer GPUs, app containers only, and never in a pod that also asks
// aliyun.com/gpu-mem (errors name the container and say so). A compute share: 1..100, in an app
// container that asks a memory share or a fraction (never whole GPUs), in a pod whose init
// containers ask no GPU memory (gpushare-node tells containers apart by their first request).
Result<PodRequest> ComputePodRequest(const std::vector<ContainerUnits>& containers);

// --- assignments ---------------------------------------------------------------------------

// container name -> GPU index, the value of gpushare.io/gpu-mem-assumed and -confirmed:
// a JSON object {"user-container":2}.
using ContainerGpus = std::map<std::string, int>;

std::string EncodeContainerGpus(const ContainerGpus& m);
Result<ContainerGpus> DecodeContainerGpus(std::string_view json);

// The assignment of every container of `request`, given the GPU of each demand (in Demands()
// order): init containers share the first demand's GPU.
ContainerGpus AssignContainers(const PodRequest& request, const std::vector<int>& demand_gpus);

// Units and clients (containers) a pod holds on each GPU, given where its containers run.
// Units on a GPU = max(sum of the app containers there, largest init container there);
// clients = the app containers there, or 1 when only init containers use it. Containers of
// `request` missing from `gpus` are reported in *missing (when given) and counted nowhere.
struct GpuUse {
  int64_t units = 0;
  int clients = 0;
  int64_t core = 0;  // compute shares of the app containers there, in percent
};
std::map<int, GpuUse> GpuUsage(const PodRequest& request, const ContainerGpus& gpus,
                               std::vector<std::string>* missing = nullptr);

// UnixNano as a decimal string, and back (nullopt for anything but a non-negative integer).
std::string EncodeAssumeTime(int64_t unix_nanos);
std::optional<int64_t> DecodeAssumeTime(std::string_view s);

// The annotations gpushare-scheduler writes at bind. `gpus` has one entry per demand;
// `dev_units` is the units of the first demand's GPU.
std::map<std::string, std::string> BindAnnotations(const PodRequest& request,
                                                   const std::vector<int>& demand_gpus,
                                                   int64_t dev_units, int64_t assume_unix_nanos);
// The annotations gpushare-node writes once it knows where each container's units are:
// ASSIGNED=true, IDX=the real GPU of the first demand's container, and the confirmed JSON.
// Both write ACK's allocation and assigned keys beside them (kAckAllocationKey).
std::map<std::string, std::string> ConfirmAnnotations(const PodRequest& request,
                                                      const ContainerGpus& actual);

// ACK's allocation JSON for `request` placed at `gpus` (container -> GPU, as AssignContainers and
// the confirmed map give it): each app container's units on each of its GPUs, by spec index.
// Containers without an index (a request not built from a pod) or without a GPU are left out.
std::string EncodeAckAllocation(const PodRequest& request, const ContainerGpus& gpus);
// And back, as container name -> GPU (a container on several GPUs: its demands' names, as
// WholeGpuSlotName, in GPU order). Errors name what is wrong.
Result<ContainerGpus> DecodeAckAllocation(std::string_view json, const PodRequest& request);

// What a pod's annotations say about where it runs.
enum class AssignmentState {
  kNone,       // no (readable) assignment
  kAssumed,    // the scheduler's decision, not yet confirmed by the node
  kConfirmed,  // the node agent saw kubelet's allocation (ASSIGNED=true)
};
std::string_view AssignmentStateName(AssignmentState s);

struct PodAssignment {
  AssignmentState state = AssignmentState::kNone;
  ContainerGpus gpus;  // every container of the request, when state != kNone
  // Where the scheduler placed the containers: gpushare.io/gpu-mem-assumed when readable (the
  // node agent never rewrites it), else the same as `gpus` (pods written by Alibaba's extender
  // or bound around the extender). Every container of the request, when state != kNone.
  ContainerGpus planned;
  bool has_plan = false;               // gpushare.io/gpu-mem-assumed was readable
  std::optional<int64_t> assume_time;  // ALIYUN_COM_GPU_MEM_ASSUME_TIME
  std::vector<std::string> problems;   // unreadable annotations that were skipped
};

// Reads a pod's annotations. Where the containers are: gpushare.io/gpu-mem-confirmed if
// readable, else gpushare.io/gpu-mem-assumed, else ACK's scheduler.framework.gpushare.allocation
// (pods written by ACK's scheduler), else ALIYUN_COM_GPU_MEM_IDX for every container (pods
// written by Alibaba's extender); containers missing from a JSON map fall back to IDX.
// State: confirmed when the confirmed map is readable or ASSIGNED is "true" (without ASSIGNED:
// ACK's assigned), assumed when a location is known otherwise, none when no container can be
// located.
PodAssignment ResolveAssignment(const std::map<std::string, std::string>& annotations,
                                const PodRequest& request);

}  // namespace gpushare::memshare
