// GpuCache: gpushare-scheduler's view of every memory-share GPU in the cluster, and the one
// place where filter, prioritize and bind decide.
//
// Truth sources (docs/scheduler.md): per-GPU capacity comes from each node's
// gpushare.io/gpu-inventory annotation; usage comes from the pods' annotations (core/memshare.h:
// the node agent's confirmed map wins over the scheduler's assumed one, which wins over
// ALIYUN_COM_GPU_MEM_IDX), plus this process's own reservations for binds in flight. Only pods
// bound to a node (spec.nodeName) and not finished count; deleted, Succeeded and Failed pods
// release what they held. An assumed pod that gpushare-node never confirms is released after a
// timeout (ExpireAssumed), as long as it is still Pending.
//
// Decisions go through the placement engine (core/placement) with a policy (`default` unless
// configured otherwise): the cache keeps a ClusterState whose GPUs are the usable GPUs of each
// node (healthy, in memory mode), in aliyun.com/gpu-mem units, mirrored from the usage above
// (saturated at the GPU's capacity and client ceiling when the truth is over-full). The
// engine's target workload is the one configured (CacheOptions::target_workload), else the
// distribution of the pods bound to the cache's nodes. Ties between equally good nodes go to a
// fixed pseudo-random order of their names (TieRank), not to the order the nodes were seen.
//
// Concurrency: every public method takes one mutex (mu_), so a reservation made by Reserve() is
// visible to the next Filter()/Reserve() at once; the API calls of a bind happen outside the lock,
// and a failed bind gives its reservation back with Rollback(). A GPU is never booked beyond its
// capacity or client ceiling by Reserve(). No I/O, no clocks (times are passed in). The private
// helpers require mu_ held, and every member but options_ is guarded by it; clang's
// -Wthread-safety checks both (base/sync.h).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/sync.h"
#include "core/memshare.h"
#include "core/placement/engine.h"
#include "core/placement/fragmentation.h"
#include "core/placement/policy.h"
#include "core/placement/preemption.h"
#include "core/placement/rng.h"
#include "core/status.h"
#include "kube/objects.h"
#include "kube/pod_requests.h"
#include "scheduler/name_index.h"
#include "scheduler/target_workload.h"

namespace gpushare::scheduler {

struct CacheOptions {
  memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB;  // the cluster's aliyun.com/gpu-mem unit
  std::string resource_name = std::string(memshare::kResourceName);  // the memory-share resource
  std::string policy = "default";  // placement policy (core/placement/policy.h)
  uint64_t seed = 1;               // for the `random` policy
  // The pods the policy weighs nodes against (scheduler/target_workload.h: --target-workload);
  // empty: learnt from the pods bound to the cache's nodes, GPU or not.
  std::vector<TargetPod> target_workload;
  // After the cache first syncs, each node with pending pods (placed, not yet confirmed by the
  // node agent) takes no new shares until they are confirmed or gone, or for this long at most
  // (counted from the first ExpireAssumed sweep); 0: no hold. Why: a restart forgets the pods
  // released while the process was away, and a pending pod may sit in such a pod's slot.
  int64_t restart_hold_ns = 30'000'000'000;
  // One structured line per notable change (inventory changes, corrected or unreadable
  // annotations, releases). Default: dropped.
  std::function<void(const std::string& line)> log;
};

// The pod a decision is for. A preemption's hold (Nomination) counts as booked for every pod but
// its own nominee and pods of higher priority: kube-scheduler, too, counts a nominated pod on
// its node only for pods of lower or equal priority. The default asker is exempt from nothing.
struct Asker {
  std::string uid;
  int32_t priority = std::numeric_limits<int32_t>::min();
  static Asker Of(const kube::Pod& pod) { return {pod.metadata.uid, pod.spec.priority}; }
};

// Where kube-scheduler's preemption makes room for a pending pod (Preempt, scheduler/preempt.h):
// the GPU(s) its victims free, held for it on `node` until it is bound there, deleted, or
// nominated elsewhere by kube-scheduler, or until the hold expires (ExpireNominations). The
// victims' replacements and other pending shares of lower or equal priority cannot take them.
struct Nomination {
  std::string uid, key, node;
  int32_t priority = 0;
  memshare::ContainerGpus gpus;         // container -> GPU index, where the pod is to go
  std::map<int, memshare::GpuUse> use;  // what it holds there, per GPU index
  std::vector<std::string> victims;     // UIDs of the pods evicted for it
  // A pick (GpuCache::Pick): the policy's choice for the pod, held from its scheduling cycle
  // to its bind, with no victims; it ends like a preemption's hold, or after the pick timeout.
  bool pick = false;
  int64_t since_ns = 0;
  bool seen = false;            // the pod's status.nominatedNodeName was seen naming `node`
  int64_t victims_gone_ns = 0;  // when the sweep first found none of the victims left (0: not yet)
};

// One node as preemption sees it (GpuCache::ViewForPreemption): the victim choice's input, every
// pod counted on the node's GPUs with its priority, start and whether its deletion has started
// (from the informer's last copy); a pod whose bind is still in flight is not evictable
// (kube-scheduler does not list it on the node yet). Budgets are the caller's to add.
struct PreemptionNodeView {
  std::string name;
  bool usable = false;
  std::string problem;               // why not (when !usable)
  placement::PreemptionInput input;  // node: its usable GPUs, holds the asker is exempt from free
  std::vector<int> slots;            // slot -> GPU index
  placement::PodShape shape;         // the request as the engine sees it on this node
  // The pods' UIDs and keys ("namespace/name"), in input.pods order.
  std::string_view Uid(size_t pod) const { return Id(pod, 0); }
  std::string_view Key(size_t pod) const { return Id(pod, 1); }
  void AddIds(std::string_view uid, std::string_view key);
  void ReserveIds(size_t pods, size_t bytes_each);

 private:
  std::string_view Id(size_t pod, int which) const;
  std::string ids_;              // "<uid><key>" per pod, one buffer
  std::vector<uint32_t> id_at_;  // per pod: offset, uid length, key length
};
struct PreemptionView {
  std::vector<PreemptionNodeView> nodes;
};

// The verdict of the filter on one node.
struct NodeVerdict {
  enum class Kind { kFits, kFailed, kUnresolvable };
  Kind kind = Kind::kFits;
  std::string reason;     // empty when it fits; says which GPU lacked what
  bool repeat = false;    // the name appeared earlier in the same request
  std::string_view code;  // core/reasons.h code of a refusal (empty when it fits)
};

// A bind's booking, made under the lock before the API calls.
struct Reservation {
  bool already = false;          // the pod already had this booking: nothing to write
  memshare::PodRequest request;  // as booked on the node (alibabacloud.com/gpu-milli resolved)
  std::vector<int> demand_gpus;  // GPU index per demand (request.Demands() order)
  memshare::ContainerGpus containers;
  int64_t dev_units = 0;  // units of the first demand's GPU
  int64_t assume_ns = 0;
  uint64_t token = 0;  // identifies this reservation for Commit/Rollback
};

// One GPU as the cache sees it (for tests, PREFIX/debug/cache and logs).
struct GpuState {
  int index = 0;
  int64_t capacity = 0;  // units
  int64_t used = 0;      // units booked (may exceed capacity when the truth is over-full)
  int clients = 0;
  int64_t core = 0;     // compute shares booked, in percent (aliyun.com/gpu-core.percentage)
  bool usable = false;  // healthy and in memory mode
};

// A plan move (PlanMoves).
struct PlanMove {
  std::string key;  // namespace/name
  std::string uid;
  std::string node;
  memshare::ContainerGpus from, to;
};

// A pod released by ExpireAssumed.
struct ExpiredPod {
  std::string key;  // namespace/name
  std::string uid;
  std::string node;
  memshare::ContainerGpus gpus;
  int64_t units = 0;
  int64_t age_ns = 0;
};

struct CacheStats {
  int nodes = 0;  // nodes with a readable inventory
  int usable_gpus = 0;
  int pods = 0;        // pods whose usage is counted
  int assumed = 0;     // counted pods not yet confirmed by gpushare-node (binds in flight too)
  int reserved = 0;    // binds in flight
  int expired = 0;     // pods released by the assume timeout and not confirmed since
  int unassigned = 0;  // bound pods asking for units with no readable assignment
  int picks = 0;       // picks held now (GpuCache::Pick)
  uint64_t picks_expired = 0;  // picks that ended without their pod's bind (the pick timeout)
  uint64_t rebuilds = 0;       // engine views rebuilt from scratch
  uint64_t policy_refreshes = 0;
  // The policy's target workload: the pods it stands for and the shapes it keeps (the most
  // common, 95% of its pods), configured or learnt.
  int64_t workload_pods = 0;
  int workload_shapes = 0;
};

// One GPU for the per-GPU gauges of /metrics (GpuCache::VisitGpus). The references are valid
// only during the visitor's call.
struct GpuSample {
  const std::string& node;
  const memshare::InventoryGpu& gpu;
  int64_t used_units = 0;  // booked (may exceed the GPU's units when the truth is over-full)
  int clients = 0;
  bool usable = false;
  int64_t core = 0;  // compute shares booked, in percent
};

// The cache's view of one node for PREFIX/debug/cache (scheduler/inspect.h encodes it).
struct InspectPod {
  std::string namespace_, name, uid;
  int64_t units = 0;            // on this GPU (InspectGpu::pods), or in all (InspectNode::pending)
  bool confirmed = false;       // by gpushare-node; else assumed (booked by the scheduler)
  bool bind_in_flight = false;  // booked by a bind whose API calls have not finished
  std::map<std::string, int64_t> containers;  // container -> units (on this GPU, or in all)
  memshare::ContainerGpus gpus;               // container -> GPU index (pending pods only)
};
struct InspectGpu {
  memshare::InventoryGpu gpu;
  int64_t used_units = 0;
  int clients = 0;
  int64_t core = 0;  // compute shares booked, in percent
  bool usable = false;
  std::vector<InspectPod> pods;  // by namespace/name
};
struct InspectNode {
  std::string name;
  bool usable = false;            // takes memory shares now
  std::string problem;            // why not (empty when usable)
  std::string_view problem_code;  // core/reasons.h
  int max_clients_per_gpu = 0;
  std::vector<InspectGpu> gpus;       // in index order
  std::vector<InspectPod> pending;    // booked here, not yet confirmed by gpushare-node
  std::vector<Nomination> nominated;  // preemption's holds on this node's GPUs
};

class GpuCache {
 public:
  explicit GpuCache(CacheOptions options = {});
  ~GpuCache();
  GpuCache(const GpuCache&) = delete;
  GpuCache& operator=(const GpuCache&) = delete;

  // --- feeding (informer handlers) ---
  void UpsertNode(const kube::Node& node) GPUSHARE_EXCLUDES(mu_);
  void DeleteNode(const std::string& name) GPUSHARE_EXCLUDES(mu_);
  void UpsertPod(const kube::Pod& pod) GPUSHARE_EXCLUDES(mu_);
  void DeletePod(const kube::Pod& last_known) GPUSHARE_EXCLUDES(mu_);
  // Filter, prioritize and bind refuse to decide until the cache is synced.
  void SetSynced(bool synced) GPUSHARE_EXCLUDES(mu_);
  bool synced() const GPUSHARE_EXCLUDES(mu_);

  // --- decisions ---
  // One verdict per node, in order (a name listed twice is marked `repeat` the second time).
  std::vector<NodeVerdict> Filter(const memshare::PodRequest& request,
                                  const std::vector<std::string_view>& nodes,
                                  const Asker& asker = {}) GPUSHARE_EXCLUDES(mu_);
  // Scores 0..10 per node, in order (0 for nodes that cannot take the pod, -1 for a name listed
  // a second time). The node the engine would choose gets 10 and no other node does. (Holds of
  // preemption count as booked here for every asker: scores only rank the nodes Filter passed.)
  // `cpu`: the pod's CPU and memory requests, which the policy weighs against each node's
  // (kube-scheduler alone filters on them).
  std::vector<int64_t> Score(const memshare::PodRequest& request,
                             const std::vector<std::string_view>& nodes,
                             const kube::CpuMemory& cpu = {}) GPUSHARE_EXCLUDES(mu_);
  // Books `pod` on `node`: chooses the GPU(s) and records the reservation. Idempotent for a pod
  // already booked on that node (Reservation::already). Errors: kResourceExhausted (no room;
  // the reason says why), kFailedPrecondition (booked on another node, node unusable),
  // kAborted (a bind for the same pod is in flight), kUnavailable (not synced).
  // Every refusal carries its core/reasons.h code (Status::reason): BindConflict for no room
  // any more, the node's own code where it cannot take the pod at all, SchedulerNotReady.
  Result<Reservation> Reserve(const kube::Pod& pod, const memshare::PodRequest& request,
                              const std::string& node, int64_t now_ns) GPUSHARE_EXCLUDES(mu_);
  // A pod with a Nomination on `node` is booked on the GPUs it names when they have room; a pod
  // exempt from other pods' holds (higher priority) takes their GPUs only when nothing else on
  // the node fits, and those holds end.
  // The API calls succeeded: the reservation stays until the pod's annotations arrive.
  void Commit(const std::string& pod_uid, uint64_t token) GPUSHARE_EXCLUDES(mu_);
  // The API calls failed: the reservation is given back (no-op if the pod has meanwhile been
  // seen bound in the API, or was deleted).
  void Rollback(const std::string& pod_uid, uint64_t token) GPUSHARE_EXCLUDES(mu_);

  // Holds the GPUs the policy chooses for `pod` on `node` (the node the filter kept with
  // --filter-keep-best, or the one prioritize ranked first) until its bind: a pick. Between a
  // pod's scheduling cycle and its bind, kube-scheduler counts the pod on the node (its assumed
  // pods) only in the resources it knows; it cannot count alibabacloud.com/gpu-milli (ignored by
  // it) nor which GPU a share takes, so without the pick the next pods' filters see the GPU free
  // and their binds conflict. A pick counts as booked like a preemption's hold (for pods of
  // lower or equal priority; the pod itself is exempt); the bind books the picked GPUs when
  // they still have room, and the pick ends when the pod is bound (here or elsewhere), deleted,
  // nominated by preemption, picked again, or after the pick timeout (ExpireNominations). A pod
  // already booked, or holding a preemption's hold, is left as it is. Errors: kUnavailable (not
  // synced), kFailedPrecondition (the node cannot take the pod), kResourceExhausted (no room).
  Status Pick(const kube::Pod& pod, const memshare::PodRequest& request, const std::string& node,
              int64_t now_ns) GPUSHARE_EXCLUDES(mu_);

  // Releases pods assumed (not confirmed) for longer than `timeout_ns` that are still Pending.
  std::vector<ExpiredPod> ExpireAssumed(int64_t now_ns, int64_t timeout_ns) GPUSHARE_EXCLUDES(mu_);

  // --- preemption ---
  // The listed nodes' GPUs and pods, for choosing victims for `asker` (holds it is exempt from
  // count as free). Errors: kUnavailable (not synced), the request's own error.
  Result<PreemptionView> ViewForPreemption(const memshare::PodRequest& request, const Asker& asker,
                                           const std::vector<std::string_view>& nodes)
      GPUSHARE_EXCLUDES(mu_);
  // Holds the GPUs `slots` (a placement::VictimSet's assignment, by slot of `node`) for `pod`,
  // replacing any hold it had, and ends the holds of lower-priority pods on `node` (kube-scheduler
  // clears their nominations when it nominates a pod there).
  Result<Nomination> Nominate(const kube::Pod& pod, const memshare::PodRequest& request,
                              const std::string& node, const placement::GpuAssignment& slots,
                              std::vector<std::string> victims, int64_t now_ns)
      GPUSHARE_EXCLUDES(mu_);
  // Ends holds whose pod was never seen nominated on their node within `timeout_ns`, holds
  // whose victims have all been gone for `timeout_ns`, and picks older than `pick_timeout_ns`.
  std::vector<Nomination> ExpireNominations(int64_t now_ns, int64_t timeout_ns,
                                            int64_t pick_timeout_ns) GPUSHARE_EXCLUDES(mu_);
  std::vector<Nomination> Nominations() const GPUSHARE_EXCLUDES(mu_);

  // Plans to move (memshare::SettledPlanMoves): confirmed pods held off their plan whose
  // planned slot nobody pending needs any more. The cache counts the new plans at once; the
  // caller writes them (gpushare.io/gpu-mem-assumed), and the informer brings them back.
  std::vector<PlanMove> PlanMoves() GPUSHARE_EXCLUDES(mu_);

  // --- introspection ---
  std::vector<GpuState> NodeGpus(const std::string& node) const GPUSHARE_EXCLUDES(mu_);
  // Calls `visit` for every GPU of every node with an inventory, by node name then index, under
  // the lock (so keep it short: /metrics builds its samples here, nothing else).
  void VisitGpus(const std::function<void(const GpuSample&)>& visit) const GPUSHARE_EXCLUDES(mu_);
  // Every node the informer has seen (by name), or the one named (nullopt if unknown).
  std::vector<InspectNode> Inspect() const GPUSHARE_EXCLUDES(mu_);
  // The distinct GPU models of the nodes' inventories (every mode), sorted: what a pod's
  // nvidia.com/use-gputype may name (the webhook refuses other names).
  std::vector<std::string> GpuModels() const GPUSHARE_EXCLUDES(mu_);
  std::optional<InspectNode> InspectOne(std::string_view node) const GPUSHARE_EXCLUDES(mu_);
  CacheStats stats() const GPUSHARE_EXCLUDES(mu_);
  // Where the cache books a pod (empty when it books nothing for it).
  memshare::ContainerGpus PodGpus(const std::string& pod_uid) const GPUSHARE_EXCLUDES(mu_);

 private:
  struct NodeRec;
  struct PodRec;

  void Log(const std::string& line) const;  // options_.log, which needs no lock
  NodeRec& NodeFor(const std::string& name) GPUSHARE_REQUIRES(mu_);
  // `released`: the pod is gone or finished (rather than not counted any more).
  void RemovePod(const std::string& uid, bool released = false) GPUSHARE_REQUIRES(mu_);
  void GuardRelease(NodeRec& n, const PodRec& p) GPUSHARE_REQUIRES(mu_);
  void SettleGuards(NodeRec& n) GPUSHARE_REQUIRES(mu_);
  Result<Reservation> ReserveLocked(const kube::Pod& pod, const memshare::PodRequest& request,
                                    const std::string& node, int64_t now_ns) GPUSHARE_REQUIRES(mu_);
  NodeVerdict HeldBack(const NodeRec& n) const GPUSHARE_REQUIRES(mu_);
  // Whether pod `p`, confirmed away from its plan (a swap), may have its plan moved to where it
  // is now: the node has nothing pending (no pod placed and not yet confirmed, no guard) whose
  // slot the swap's open slot might be kept for (memshare::SettledPlanMoves' condition).
  static bool PlanMovable(const NodeRec& n, const PodRec& p);
  void AddUse(PodRec& p) GPUSHARE_REQUIRES(mu_);
  void RemoveUse(PodRec& p) GPUSHARE_REQUIRES(mu_);
  void CountPod(NodeRec& n, const PodRec& p, int sign) GPUSHARE_REQUIRES(mu_);
  void Recount(NodeRec& n) GPUSHARE_REQUIRES(mu_);
  void SetPodShape(PodRec& p, bool counted) GPUSHARE_REQUIRES(mu_);
  void EnsureEngine() GPUSHARE_REQUIRES(mu_);
  void Rebuild() GPUSHARE_REQUIRES(mu_);
  void RefreshPolicy() GPUSHARE_REQUIRES(mu_);
  void AddToEngine(NodeRec& n) GPUSHARE_REQUIRES(mu_);
  void Resync(NodeRec& n) GPUSHARE_REQUIRES(mu_);
  // The engine's shape of `request` on `n` (with `cpu`: for scores only; filters and binds leave
  // CPU and memory to kube-scheduler).
  Result<placement::ShapeId> Shape(const NodeRec& n, const memshare::PodRequest& request,
                                   const kube::CpuMemory& cpu = {}) GPUSHARE_REQUIRES(mu_);
  // What the engine books for `request` (resolved on `n`) there: Demands() in engine units,
  // whole GPUs negative (ShapeKey), so equal keys are equal shapes on every node.
  std::vector<int64_t> EngineKey(const NodeRec& n, const memshare::PodRequest& request) const
      GPUSHARE_REQUIRES(mu_);
  // The target-workload key of `p` (its CPU request and EngineKey) on `n`, where it is counted.
  std::vector<int64_t> PodWorkloadKey(const NodeRec& n, const PodRec& p) const
      GPUSHARE_REQUIRES(mu_);
  // Engine units per GPU: the least common multiple of the nodes' GPU sizes (so that a GPU of
  // every size is 1000 x common_units_ engine units), or 0 when it would pass kMaxCommonUnits
  // (then the engine counts thousandths of a unit on every node). Recomputed by Rebuild.
  void ChooseEngineUnits() GPUSHARE_REQUIRES(mu_);
  bool EngineUnitsFit(const NodeRec& n) const GPUSHARE_REQUIRES(mu_);
  // Engine units per thousandth of a unit on `n`: common_units_ / its largest GPU's units (1 when
  // that size does not divide common_units_: until the rebuild, or past kMaxCommonUnits).
  int64_t Factor(const NodeRec& n) const GPUSHARE_REQUIRES(mu_);
  void UpsertPodLocked(const kube::Pod& pod) GPUSHARE_REQUIRES(mu_);
  // `request` on `n` (alibabacloud.com/gpu-milli resolved against its GPUs' size); the error
  // says why a node cannot take fractions or whole GPUs.
  Result<memshare::PodRequest> OnNode(const NodeRec& n, const memshare::PodRequest& request) const
      GPUSHARE_REQUIRES(mu_);
  // `asker`: holds of preemption it is exempt from count as free (default: none is). A pod
  // whose GpuSelector excludes every memory-share GPU of `n` is refused here as unresolvable,
  // naming each GPU and the annotation that excludes it; other refusals say which GPUs it
  // excluded. (The excluded GPUs themselves are masked on the engine's state: Mask.)
  NodeVerdict Check(const NodeRec& n, const memshare::PodRequest& request,
                    const placement::PodShape& shape, const Asker& asker = {}) const
      GPUSHARE_REQUIRES(mu_);
  NodeVerdict CheckRoom(const NodeRec& n, const memshare::PodRequest& request,
                        const placement::PodShape& shape, const Asker& asker) const
      GPUSHARE_REQUIRES(mu_);
  // The GPUs a pod may not use (its GpuSelector's exclusions, GPUs without its compute share
  // left), for the length of one decision: each such memory-share GPU of the named nodes is
  // filled on the engine's state (a filler placement of its free memory), so the engine's
  // filter, scores and choice see it full; Unmask gives the fillers back. Nothing may resync or
  // rebuild the engine in between. Nodes where every GPU is excluded get no fillers (Check
  // refuses them first): `blocked`.
  struct Masked {
    std::vector<placement::PlacementId> fillers;
    std::unordered_set<const NodeRec*> blocked;
  };
  Masked Mask(const memshare::PodRequest& request, const std::vector<const NodeRec*>& nodes,
              const Asker& asker = {}) GPUSHARE_REQUIRES(mu_);
  Masked MaskNamed(const memshare::PodRequest& request, const std::vector<std::string_view>& names,
                   const Asker& asker = {}) GPUSHARE_REQUIRES(mu_);
  void Unmask(Masked& masked) GPUSHARE_REQUIRES(mu_);
  // Check for one node with the pod's excluded GPUs masked (binds and picks).
  NodeVerdict CheckAlone(const NodeRec& n, const memshare::PodRequest& request,
                         const placement::PodShape& shape, const Asker& asker = {})
      GPUSHARE_REQUIRES(mu_);
  // How many memory-share slots of `n` the pod may not use; which, in *excluded (1 per slot):
  // those its GpuSelector excludes, and (unless `choice_only`) those without its compute share
  // (PodRequest::CoreSum) left of their 100 % (preemption's holds that `asker` is exempt from,
  // its own among them, not counted).
  size_t ExcludedSlots(const NodeRec& n, const memshare::PodRequest& request,
                       std::vector<char>* excluded = nullptr, bool choice_only = false,
                       const Asker& asker = {}) const GPUSHARE_REQUIRES(mu_);
  // Per memory-share slot of `n`: why the pod may not use its GPU ("" where it may).
  std::vector<std::string> Exclusions(const NodeRec& n, const memshare::PodRequest& request,
                                      const Asker& asker = {}) const GPUSHARE_REQUIRES(mu_);
  // The compute shares booked on each GPU index of `n` that `asker` must leave room for.
  std::map<int, int64_t> CoreBooked(const NodeRec& n, const Asker& asker) const
      GPUSHARE_REQUIRES(mu_);
  // Nominations: booked in NodeRec::nominated (counted by Recount), indexed by nominee.
  void AddNomination(Nomination nom) GPUSHARE_REQUIRES(mu_);
  void DropNomination(const std::string& uid, std::string_view why) GPUSHARE_REQUIRES(mu_);
  // What the holds on `n` that `asker` is exempt from book, per GPU index (empty: none).
  std::map<int, memshare::GpuUse> Exempt(const NodeRec& n, const Asker& asker) const
      GPUSHARE_REQUIRES(mu_);
  // The engine's state of `n` with `lifted` given back.
  placement::NodeState StateWithout(const NodeRec& n,
                                    const std::map<int, memshare::GpuUse>& lifted) const
      GPUSHARE_REQUIRES(mu_);
  // Books `request` on `n` at `demand_gpus` (GPU index per demand) once the usage has room.
  Result<Reservation> Book(const kube::Pod& pod, const memshare::PodRequest& request, NodeRec& n,
                           const std::vector<int>& demand_gpus, int64_t now_ns)
      GPUSHARE_REQUIRES(mu_);
  // kFailed when the pod's slot keys clash with the node's pending ones (memshare::FreshConflict).
  // The GPU(s) the engine chooses for `request` (shape `shape`) on `n`, per demand.
  Result<std::vector<int>> Choose(const NodeRec& n, const memshare::PodRequest& request,
                                  placement::ShapeId shape) GPUSHARE_REQUIRES(mu_);
  NodeVerdict Clash(const NodeRec& n, const memshare::PodRequest& request) const
      GPUSHARE_REQUIRES(mu_);

  const CacheOptions options_;
  mutable Mutex mu_;
  bool synced_ GPUSHARE_GUARDED_BY(mu_) = false;
  bool ever_synced_ GPUSHARE_GUARDED_BY(mu_) = false;
  // By name (ordered: deterministic rebuilds).
  std::map<std::string, std::unique_ptr<NodeRec>> nodes_ GPUSHARE_GUARDED_BY(mu_);
  // The hot path (filter and prioritize read one node per listed name): names to dense ids,
  // and per id the record and the little a verdict needs, packed (5,000 nodes: 80 KiB).
  struct NodeHot {
    placement::NodeId eid =
        -1;  // the engine's node when it can take shares (exists, inventory, GPUs), else -1
    uint64_t visit = 0;  // visit_ when last listed in a request (repeats)
  };
  NameIndex node_index_ GPUSHARE_GUARDED_BY(mu_);
  std::vector<NodeRec*> by_id_ GPUSHARE_GUARDED_BY(mu_);
  std::vector<NodeHot> hot_ GPUSHARE_GUARDED_BY(mu_);
  NodeRec* FindNode(std::string_view name) const GPUSHARE_REQUIRES(mu_);
  InspectNode InspectRec(const NodeRec& n) const GPUSHARE_REQUIRES(mu_);
  void RefreshHot(const NodeRec& n) GPUSHARE_REQUIRES(mu_);
  std::unordered_map<std::string, std::unique_ptr<PodRec>> pods_
      GPUSHARE_GUARDED_BY(mu_);  // by UID
  // Bound pods asking alibabacloud.com/gpu-milli on a node whose GPUs' size is not known yet:
  // counted once the node's inventory says it (UpsertNode).
  std::map<std::string, kube::Pod> unresolved_ GPUSHARE_GUARDED_BY(mu_);
  // Every bound, unfinished pod's CPU and memory requests (GPU or not), by UID: what the
  // policy sees of each node's CPU and memory (kube-scheduler checks them; the policy weighs
  // them, as in gpushare simulate).
  struct PodCpu {
    std::string node;
    kube::CpuMemory r;
    bool reserved = false;  // counted by Book before the informer showed the pod bound
  };
  std::unordered_map<std::string, PodCpu> pod_cpu_ GPUSHARE_GUARDED_BY(mu_);
  void CountCpu(const std::string& uid, const std::string& node, const kube::CpuMemory& r,
                bool reserved = false) GPUSHARE_REQUIRES(mu_);
  // Bound pods asking no GPU, on a node the engine models, by UID -> their CPU request: they count
  // in the learnt target workload (they take CPU a GPU pod needs, as the trace's CPU-only pods
  // do in gpushare simulate's workload).
  std::unordered_map<std::string, int64_t> cpu_only_ GPUSHARE_GUARDED_BY(mu_);
  // cpu_milli 0: the pod is not (or no longer) one of them.
  void SetCpuOnlyShape(const std::string& uid, int64_t cpu_milli) GPUSHARE_REQUIRES(mu_);
  // The learnt workload changed by a shape or by its size (doubled or halved): refresh the
  // policy's (never with a configured one).
  void NoteWorkloadChange(bool new_shape) GPUSHARE_REQUIRES(mu_);
  // The configured target workload as engine requests (keyed on a node the engine models; false
  // when there is none yet: the GPU pods are left out until one comes).
  bool ConfiguredWorkload(std::vector<placement::WeightedRequest>* pods) const
      GPUSHARE_REQUIRES(mu_);
  std::unordered_map<std::string, std::string> unassigned_
      GPUSHARE_GUARDED_BY(mu_);  // UID -> node, not counted
  std::map<std::string, Nomination> nominations_ GPUSHARE_GUARDED_BY(mu_);  // by nominee UID
  // Plans Nominate moved (a swapped pod's plan to where it is), for PlanMoves to hand out.
  std::vector<PlanMove> nomination_moves_ GPUSHARE_GUARDED_BY(mu_);
  uint64_t next_token_ GPUSHARE_GUARDED_BY(mu_) = 1;
  uint64_t visit_ GPUSHARE_GUARDED_BY(mu_) =
      0;  // marks nodes seen in the current request (repeats)

  // The engine's view.
  placement::ClusterState cluster_ GPUSHARE_GUARDED_BY(mu_);
  placement::TargetWorkload workload_ GPUSHARE_GUARDED_BY(mu_);
  placement::Rng rng_ GPUSHARE_GUARDED_BY(mu_);
  std::unique_ptr<placement::Policy> policy_ GPUSHARE_GUARDED_BY(mu_);
  std::unique_ptr<placement::PlacementEngine> engine_ GPUSHARE_GUARDED_BY(mu_);
  bool rebuild_ GPUSHARE_GUARDED_BY(mu_) = true;
  int64_t common_units_ GPUSHARE_GUARDED_BY(mu_) = 1;  // see ChooseEngineUnits
  std::vector<NodeRec*> to_add_ GPUSHARE_GUARDED_BY(mu_);
  std::set<NodeRec*> dirty_ GPUSHARE_GUARDED_BY(mu_);
  std::map<std::vector<int64_t>, int> shapes_live_
      GPUSHARE_GUARDED_BY(mu_);  // workload key (CPU, engine demands) -> counted pods
  std::set<std::vector<int64_t>> workload_shapes_
      GPUSHARE_GUARDED_BY(mu_);  // shapes in the current target workload
  int workload_pods_ GPUSHARE_GUARDED_BY(mu_) = 0;
  bool workload_stale_ GPUSHARE_GUARDED_BY(mu_) = true;
  bool workload_unkeyed_ GPUSHARE_GUARDED_BY(mu_) = false;  // configured, built before any node
  uint64_t rebuilds_ GPUSHARE_GUARDED_BY(mu_) = 0;
  uint64_t policy_refreshes_ GPUSHARE_GUARDED_BY(mu_) = 0;
  uint64_t picks_expired_ GPUSHARE_GUARDED_BY(mu_) = 0;
};

}  // namespace gpushare::scheduler
