// The slot ledger: how gpushare-scheduler and gpushare-node keep one promise about memory shares
// (aliyun.com/gpu-mem) whatever order kubelet admits pods in, as pure functions.
//
// The problem. Kubelet asks the node agent for units one container at a time and never names
// the pod (GetPreferredAllocation, Allocate). When the scheduler has placed identical pods W on
// GPU a and X on GPU b and kubelet admits X first, the agent cannot tell X from W: X gets the
// slot on a, and W later the slot on b. The pods swap GPUs; the per-GPU totals do not change.
// Bookkeeping that follows pod labels gets this wrong for a while (X confirmed on a while W
// still says a: a looks over-full, b looks free), and a bind decided in that window books a
// pod onto b that no GPU has room for when W's turn comes (issue 10, the over-booking).
//
// The rule: slots, not pods, carry the promise.
//   - A slot is one demand (PodRequest::Demands) of one pod, on the GPU the scheduler planned
//     it, with a key: the units of kubelet's first request for that demand (the request the
//     agent steers: no must_include) and the units the demand holds. Slots with equal keys are
//     interchangeable.
//   - The scheduler counts each GPU at least as full as its plan (every slot it placed there,
//     admitted or not) and at least as full as the annotations say (confirmed where the agent
//     confirmed, planned elsewhere): EffectiveUsage. It never places a pod whose keys clash
//     with a pending slot of the node (same first request, other demand): FreshConflict. A
//     released pod's slot stays counted while a swap into it may be unconfirmed
//     (ReleaseNeedsGuard).
//   - The agent gives a first request of s units only to a GPU with an open slot whose key
//     asks s first (planned there minus held there): ChooseUnits (core/memshare_node.h) over a
//     SlotLedger. So what kubelet holds per GPU never leaves the plan, and every pending slot
//     finds an open one of its key with room. Where a pod ends up off its plan with its planned
//     slot needed by nobody (its swap partner is gone), the agent moves its plan to where it is
//     (Rebase), so that the empty slot is freed on both sides at once.
// Both sides compute these from what the API (the pods' annotations) and kubelet (PodResources)
// say; the agent's only memory-only state is the allocations kubelet made since its last
// PodResources List (RecentAllocations), which the next List replaces. docs/memory-shares.md
// ("Slots") explains it with the proof sketch; tests/core/memshare_model_test.cc checks it
// over every interleaving of small cases.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/memshare.h"

namespace gpushare::memshare {

// --- slots ---------------------------------------------------------------------------------

struct SlotKey {
  int64_t fresh = 0;   // units of kubelet's first request for the demand
  int64_t demand = 0;  // units the demand holds on its GPU
  // The demand's compute share in percent (0: none). Part of the key: the agent gives a first
  // request the SM limit of the slot it serves, so pending slots that ask the same size first
  // must agree on it (FreshConflict), and a swap never moves compute between GPUs.
  int64_t core = 0;
  friend auto operator<=>(const SlotKey&, const SlotKey&) = default;
  bool odd() const { return fresh != demand; }  // a smaller init container comes first
  // Neither odd nor with a compute share: two plain keys with the same first request are equal,
  // so only a pod or a pending slot with a key that is not plain can clash (FreshConflict).
  bool plain() const { return fresh == demand && core == 0; }
};

// One key per demand, in Demands() order. Kubelet allocates init containers first, so the
// first demand's first request is the first init container with units (else the first app
// container); every other demand's first request is its own container.
std::vector<SlotKey> SlotKeys(const PodRequest& request);

// "3 GiB" or "2 GiB first, 3 GiB in all", then ", compute 30/100" with a compute share (no percent
// sign: kube-scheduler formats reasons), for messages.
std::string SlotKeyText(const SlotKey& key, MemoryUnit unit);

// --- the scheduler's count -----------------------------------------------------------------

// What the scheduler counts on each GPU of a node, from two sums over the node's pods: `plan`
// (every pod at the GPUs the scheduler placed it, gpushare.io/gpu-mem-assumed) and `current`
// (confirmed pods where the agent says they are, the others where they were placed). Each GPU
// counts the larger of the two, units and clients apart: a slot stays counted where it was
// planned until the scheduler moves the plan (SettledPlanMoves), and a pod counts where it
// really is. When
// that leaves the node with fewer units counted than either sum has (a GPU counted beyond its
// `capacity`), the difference is charged to the node's other GPUs, most free first, so the node
// never shows more free units in total than it has. GPUs missing from `capacity` are counted
// as they are.
std::map<int, GpuUse> EffectiveUsage(const std::map<int, GpuUse>& plan,
                                     const std::map<int, GpuUse>& current,
                                     const std::map<int, int64_t>& capacity);

// Why `pod` must wait before it may be placed on a node whose pending (not yet confirmed)
// slots have the keys `pending` (key -> count), or nullopt. A clash is a key with the same
// first request and another demand or compute share: the agent could not tell the two requests
// apart, and a swap would move units (or compute) between slots of different sizes.
std::optional<std::string> FreshConflict(const std::vector<SlotKey>& pod,
                                         const std::map<SlotKey, int>& pending, MemoryUnit unit);

// Whether the scheduler must keep counting a pod's planned GPUs after the pod is released
// (deleted or finished), as its annotations last said. Unless the agent confirmed the pod
// exactly where it was planned, kubelet may have put another pod into its planned slot (a
// swap), and the API says so only once the agent confirms that other pod. The scheduler keeps
// the released plan counted until every pod pending on the node at release time is confirmed
// or gone; after its own restart (which forgets releases) it takes no new shares on a node
// until the pods pending there are confirmed or gone.
bool ReleaseNeedsGuard(const PodAssignment& last_known);

// --- the agent's ledger --------------------------------------------------------------------

// What kubelet's PodResources List says one container of a pod holds of the resource.
struct ObservedContainer {
  std::string name;
  std::vector<std::string> unit_ids;
};

// A pod bound to this node with a plan (PodAssignment::planned), not finished.
struct PlannedPod {
  std::string key;  // namespace/name
  PodRequest request;
  ContainerGpus planned;
  int64_t assume_time = 0;
};

// A slot kubelet has given units for.
struct HeldSlot {
  SlotKey key;
  int gpu = -1;
  std::string pod;  // "namespace/name"; empty when unknown (an allocation not yet listed)
  int demand = -1;  // index in the pod's demands; -1 when unknown
  std::vector<std::string> ids;  // the units
};

// The slots kubelet's PodResources List shows held: for each planned pod, each demand whose
// container (PodRequest::DemandContainers) holds units, on the GPU of those units; for pods
// not in `plans` and not in `foreign` (bound around the extender), every container with units,
// keyed by its unit count (a pod the agent's cache has not seen yet). Units naming no GPU of
// `inventory` are skipped.
std::vector<HeldSlot> HeldSlots(
    const std::vector<PlannedPod>& plans,
    const std::map<std::string, std::vector<ObservedContainer>>& observed,
    const std::set<std::string>& foreign, const Inventory& inventory);

// A demand kubelet has not given units yet.
struct PendingSlot {
  std::string pod;
  std::string container;
  SlotKey key;
  int gpu = -1;  // where the scheduler planned it
  int64_t assume_time = 0;
};

struct SlotLedger {
  // (key, GPU) -> slots planned there minus slots held there (negative: more held than planned).
  std::map<std::pair<SlotKey, int>, int64_t> open;
  std::vector<PendingSlot> pending;  // oldest assume time first, then pod, then demand

  int64_t Open(const SlotKey& key, int gpu) const;
  // Open slots of `key` on `gpu` beyond the pending slots planned there: vacated by a swap.
  int64_t Vacated(const SlotKey& key, int gpu) const;
  // Units of open slots on `gpu`, all keys (what the GPU's free units are promised to).
  int64_t PromisedUnits(int gpu) const;
};

// Plans minus what is held. A held slot of a known pod and demand also takes that demand out of
// `pending`.
SlotLedger BuildLedger(const std::vector<PlannedPod>& plans, const std::vector<HeldSlot>& held);

// A pod the scheduler counts on a node, as its annotations (or its own bind) say.
struct CountedPod {
  std::string key;  // namespace/name
  PodRequest request;
  ContainerGpus planned;  // PodAssignment::planned
  ContainerGpus current;  // PodAssignment::gpus
  bool confirmed = false;
};

// Plan moves the scheduler makes on one node: a confirmed pod held off its plan (a swap whose
// partner is gone, a pod steered around a full GPU) leaves an empty planned slot that both
// binaries keep counting. For a key no pending pod of the node has (every pod with a demand of
// that key confirmed), every open slot of that key is such an empty one: demands of that key
// held on a GPU over-held in its key have their plans moved to where they are (their
// containers, init containers with the first demand), as many as the GPU is over-held. Any
// subset of the moves, made in any order, keeps every GPU counted at least as full as it is; a
// chain of swaps unwinds over successive calls. Returns the new plans by pod key. Pods pending with
// a key keep every slot of that key as it is (one of them may need it); `settled` false (a release
// guard or the hold after a start is up) moves nothing.
std::map<std::string, ContainerGpus> SettledPlanMoves(const std::vector<CountedPod>& pods,
                                                      bool settled);

// Allocations kubelet made (Allocate calls) that its PodResources List may not show yet: kubelet
// records a container's devices right after Allocate returns. Times are milliseconds of any
// monotonic clock, passed in.
class RecentAllocations {
 public:
  // An Allocate of `ids` on `gpu`. With `reuse` (kubelet handing an init container's units on to
  // the next container of the same pod), an entry whose IDs overlap is extended; otherwise
  // overlapping entries are stale (their pod is gone and kubelet gave the units out again) and
  // replaced by a new entry with `key`.
  void Add(const std::vector<std::string>& ids, int gpu, const SlotKey& key, int64_t now_ms,
           bool reuse);
  // A List that started at `list_started_ms` shows the unit IDs `listed`: entries it shows are
  // dropped (the List counts them), and so are entries made more than `grace_ms` before the
  // List started that it does not show (the admission failed, or the pod is gone).
  void Observe(const std::set<std::string>& listed, int64_t list_started_ms, int64_t grace_ms);
  // Entries not listed yet, as held slots of unknown pods.
  std::vector<HeldSlot> Held() const;
  size_t size() const { return entries_.size(); }
  void Clear() { entries_.clear(); }
  // The entries without their times, canonically (for model checking).
  std::string Fingerprint() const;

 private:
  struct Entry {
    std::set<std::string> ids;
    int gpu = -1;
    SlotKey key;
    int64_t at_ms = 0;
  };
  std::vector<Entry> entries_;
};

// The agent's account of what kubelet holds, between PodResources Lists, and the ledger that
// follows from it: the state the node agent keeps for GetPreferredAllocation, as a value.
class KubeletHoldings {
 public:
  // A PodResources List that started at `started_ms`: pod key -> containers with units.
  void Listed(std::map<std::string, std::vector<ObservedContainer>> observed, int64_t started_ms,
              int64_t grace_ms);
  bool listed() const { return listed_; }
  const std::map<std::string, std::vector<ObservedContainer>>& observed() const {
    return observed_;
  }
  // GetPreferredAllocation answered `size` units on `gpu` for a slot of `key` (none: no slot);
  // `reuse`: the request carried must_include (units an init container of the pod holds).
  void Advised(int gpu, std::optional<SlotKey> key, int64_t size, bool reuse);
  // Allocate gave `ids` on `gpu` to a container: held from now on. The key is the advised
  // slot's when kubelet took the advice, else the unit count. An Allocate that no
  // GetPreferredAllocation preceded takes only reused units (kubelet asks for advice whenever
  // it has units left to choose). Returns the advised slot's key when kubelet took the advice
  // (its `core` is the container's compute share), else nullopt.
  std::optional<SlotKey> Allocated(const std::vector<std::string>& ids, int gpu, int64_t now_ms);
  size_t unlisted() const { return recent_.size(); }
  // The state without times, canonically (for model checking).
  std::string Fingerprint() const;
  // The open and pending slots, given the plans of the pods bound to the node and the keys of
  // those bound without a plan. With `free` (kubelet's free units, as GetPreferredAllocation
  // gets them), slots whose units kubelet has given back since the last List (their pod is
  // gone) no longer count as held.
  SlotLedger Ledger(const std::vector<PlannedPod>& plans, const std::set<std::string>& foreign,
                    const Inventory& inventory, const std::set<std::string>* free = nullptr) const;
  // The held slots that ledger is built from.
  std::vector<HeldSlot> Held(const std::vector<PlannedPod>& plans,
                             const std::set<std::string>& foreign, const Inventory& inventory,
                             const std::set<std::string>* free = nullptr) const;

 private:
  std::map<std::string, std::vector<ObservedContainer>> observed_;
  bool listed_ = false;
  RecentAllocations recent_;
  struct Advice {
    bool given = false;
    int gpu = -1;
    std::optional<SlotKey> key;
    int64_t size = 0;
    bool reuse = false;
  } advice_;
};

// The plan of one pod bound to the node (nullopt when its annotations place nothing: a pod bound
// around the scheduler).
std::optional<PlannedPod> PlanOf(const std::string& key, const PodRequest& request,
                                 const PodAssignment& assignment);

}  // namespace gpushare::memshare
