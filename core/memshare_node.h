// The node side of memory shares (aliyun.com/gpu-mem), as pure functions: what gpushare-node
// publishes, how it steers kubelet, what Allocate answers and what the reconciler writes.
//
// gpushare-node's memory mode (node/memshare_service.h) does the I/O around these:
//   - BuildNodeInventory: the node annotation (core/memshare.h) from the GPUs and the plan, one
//     entry per GPU with the mode it serves and its health;
//   - ChooseUnits: GetPreferredAllocation's advice. Kubelet names no pod, so the advice is for
//     a slot (core/memshare_ledger.h): a GPU with an open slot of this size, all units there,
//     so what kubelet holds per GPU never leaves the scheduler's plan. Never units of two GPUs;
//   - CheckUnits + AllocationEnv: Allocate derives GPU and limit from the unit IDs alone;
//   - ActualGpus + ReconcileChanges: kubelet's PodResources records say which units each
//     container really holds; that truth is written into the pod's annotations, replacing the
//     scheduler's guess (identical pods admitted in another order than they were bound swap).
// Nothing here keeps state: after an agent restart the same inputs give the same answers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/memshare.h"
#include "core/memshare_ledger.h"
#include "core/node_config.h"
#include "core/resource_plan.h"
#include "core/status.h"

namespace gpushare::memshare {

// --- inventory annotation ------------------------------------------------------------------

// Mode names of GPUs that do not serve memory shares.
inline constexpr std::string_view kExclusiveMode = "exclusive";
inline constexpr std::string_view kTimeSlicingMode = "time-slicing";
inline constexpr std::string_view kMigMode = "mig";

// One entry per GPU, in index order: its mode from the plan ("memory" when the memory-share
// resource has units on it), its units, and its health (a memory GPU is Unhealthy when its
// units are; any other GPU when any device on it is).
NodeInventory BuildNodeInventory(const Inventory& inventory, const NodeConfig& config,
                                 const ResourcePlan& plan);

// The memory-share resource of a plan, or null.
const PlannedResource* FindMemoryResource(const ResourcePlan& plan);

// aliyun.com/gpu-count: GPUs in memory mode (capacity) and the healthy ones among them.
struct GpuCount {
  int64_t capacity = 0;
  int64_t allocatable = 0;
};
GpuCount CountMemoryGpus(const NodeInventory& inventory);

// --- GetPreferredAllocation ----------------------------------------------------------------

struct UnitQuery {
  std::vector<std::string> available;     // free units plus must_include
  std::vector<std::string> must_include;  // units already chosen (reused from init containers)
  int64_t size = 0;                       // the container's total request
};

struct UnitChoice {
  std::vector<std::string> ids;        // must_include first, then units of `gpu` by unit number
  int gpu = -1;                        // the GPU index chosen, -1 when nothing fits
  std::optional<PendingSlot> steered;  // the pending slot the advice most likely serves, if any
  std::optional<SlotKey> key;          // the key of the open slot the advice uses
  bool matched_pending = false;        // a pending slot asks this size first (else the caller may
                                       // look for pods its cache has not seen yet)
  std::string reason;                  // for the log: "planned", "swapped", "must_include", ...
};

// GetPreferredAllocation's advice: units of one GPU, never of two.
//   - must_include (units reused from an init container): the rest from that GPU;
//   - otherwise, a first request of `size` units goes to a GPU with an open slot whose key asks
//     `size` first and with room for the slot's whole demand: for the oldest pending slot of
//     this size, its own GPU if that still has an open slot of its key ("planned"), else the
//     fullest GPU with a slot of that key vacated by a swap ("swapped"); then any open slot of
//     this size ("open_slot");
//   - no open slot fits (a pod placed around the scheduler): the fullest GPU whose free units
//     beyond the open slots' promises have room ("unpromised_best_fit"), else the fullest with
//     room ("best_fit"); when no GPU has `size` free units, the units of the GPU with the most
//     free ones (kubelet fills the rest and Allocate refuses the mix with a message that says
//     why: "no_gpu_has_room").
// Units within a GPU are taken lowest number first. kInvalidArgument for a size below 1 or
// more must_include than size. IDs the resource does not advertise are ignored.
Result<UnitChoice> ChooseUnits(const PlannedResource& resource, const UnitQuery& query,
                               const SlotLedger& ledger);

// GetPreferredAllocation for alibabacloud.com/gpu-milli asking k x 1000 (k whole GPUs): every
// device of each of k GPUs, taken from `planned` first (the GPUs the scheduler planned whole for
// the pods pending on the node, oldest first: "planned"), then from the other GPUs with every
// device free, lowest index first ("free_gpu"). With fewer such GPUs, the free devices of the
// GPUs with the most ("no_gpu_has_room": Allocate refuses the mix and says why).
// kInvalidArgument for a size that is not a positive multiple of 1000.
Result<UnitChoice> ChooseWholeGpus(const PlannedResource& resource, const UnitQuery& query,
                                   const std::vector<int>& planned);
// GetPreferredAllocation for alibabacloud.com/gpu-milli: whole GPUs (AsksWholeGpus) by
// ChooseWholeGpus over `planned_whole`, fractions by ChooseUnits over the milli slot `ledger`.
Result<UnitChoice> ChooseMilli(const PlannedResource& resource, const UnitQuery& query,
                               const SlotLedger& ledger, const std::vector<int>& planned_whole);

// --- Allocate ------------------------------------------------------------------------------

struct UnitAllocation {
  int gpu = -1;
  std::string gpu_uuid;
  int64_t units = 0;      // this container's units (milli for alibabacloud.com/gpu-milli)
  int64_t gpu_units = 0;  // units the GPU advertises (ALIYUN_COM_GPU_MEM_DEV; 1000 for milli)
  int64_t limit_mib = 0;  // units x unit size: the container's memory limit (0: whole GPUs)
  bool milli = false;     // alibabacloud.com/gpu-milli
  std::vector<int> gpus;  // every GPU, by index (more than one for whole GPUs only)
};

// All units must be on one GPU of `resource`: kInvalidArgument naming the GPUs and their unit
// counts when they are not (kubelet mixed GPUs because no single GPU had room). For
// alibabacloud.com/gpu-milli: a fraction (fewer than 1000 devices) of one GPU, limited to that
// fraction of its memory (rounded down to a MiB), or every device of each of its GPUs (whole
// GPUs, no limit).
Result<UnitAllocation> CheckUnits(const PlannedResource& resource,
                                  const std::vector<const PlannedDevice*>& units);

// ALIYUN_COM_GPU_MEM_IDX / _CONTAINER / _DEV / _POD for the container. Allocate sees one
// container and no pod, so _POD is this container's units (the pod's total for the usual pod
// with one GPU container; the pod annotation has the real total). For milli: IDX (the GPUs,
// comma-separated) only: the other three count memory units.
std::map<std::string, std::string> AllocationEnv(const UnitAllocation& a);

// The compute share (percent, 0: none) of a container kubelet gave `units` units without the
// agent's advice for a slot: the core of the node's pending slots that ask `units` first. The
// scheduler places no pod whose first request clashes with a pending one in demand or compute
// share (FreshConflict), so they agree; 0 when none asks that size first.
int64_t PendingCore(const SlotLedger& ledger, int64_t units);

// --- reconciliation ------------------------------------------------------------------------

struct ActualPlacement {
  ContainerGpus gpus;                 // every container of the request (init ones included)
  bool complete = false;              // every app container with units was seen with units
  std::vector<std::string> problems;  // unknown IDs, units that span GPUs, wrong counts
};

// Maps each observed container's unit IDs to the GPU they encode (by UUID, through the node's
// GPUs, so it holds across reloads). Init containers are not listed by PodResources; they ran
// on the GPU of the first app container with units (they are given that GPU). Milli devices
// ("-_-m<j>") of a request asked in milli count in milli: a fraction is its milli on one GPU, k
// whole GPUs are 1000 on each of k GPUs, given to the container's whole-GPU demands
// (WholeGpuSlotName) in GPU index order.
ActualPlacement ActualGpus(const PodRequest& request,
                           const std::vector<ObservedContainer>& observed,
                           const Inventory& inventory);

// The annotation changes that make a pod's annotations say `actual` (memshare::ConfirmAnnotations,
// plus ALIYUN_COM_GPU_MEM_DEV = `dev_units` of the real GPU when >= 0), only the keys whose
// value differs; empty when the pod already tells the truth.
std::map<std::string, std::string> ReconcileChanges(
    const std::map<std::string, std::string>& annotations, const PodRequest& request,
    const ContainerGpus& actual, int64_t dev_units = -1);

}  // namespace gpushare::memshare
