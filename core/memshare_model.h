// A model of the memory-share protocol (aliyun.com/gpu-mem) on one node, to check its promise
// over interleavings: no pod is ever refused at admission because of gpushare's own
// bookkeeping, whatever order binds complete in and kubelet admits in, with gpushare-scheduler
// and gpushare-node restarted at any point; and with compute shares, every container's Allocate
// gives it its own share and the shares kubelet holds on a GPU never pass 100 %.
//
// The parties and what they do, each step one event:
//   - gpushare-scheduler: Reserve (a bind decides the pod's GPUs from the scheduler's cache
//     view, with memshare::EffectiveUsage and memshare::FreshConflict: any GPUs that view
//     allows, a superset of what the placement engine picks), Annotate (the pod's annotations
//     written), Bind (the Binding created), SchedulerSees (its informer delivers a pod's latest
//     state), SchedulerRestart (in-flight binds lost, the cache rebuilt from the API),
//     SchedulerMovesPlan (a confirmed pod's plan moved to where it is once nothing pending of
//     its key needs its empty planned slot);
//   - kubelet: Admit (a bound pod's containers allocated in kubelet's order, reusing init
//     containers' units as kubelet does, each first request steered by the agent's
//     GetPreferredAllocation answer, each Allocate checked by the agent: a refusal or a
//     shortage is the violation the checker looks for), Delete (a bound pod goes away);
//   - gpushare-node: AgentSees (its pod informer), AgentList (a PodResources List),
//     AgentConfirm (the reconciler writes where a pod's units are), AgentRestart.
// The decisions are the product's own pure functions (core/memshare.h, core/memshare_ledger.h,
// core/memshare_node.h); only the I/O between them is modelled. Informers deliver each pod's
// latest state whenever they like (any lag), binds overlap, and kubelet admits any bound pod.
// Not modelled: the scheduler's assume timeout (its promise is kept only while pods are
// admitted within --assume-timeout), pods placed around the scheduler, kubelet ignoring the
// advice. tests/core/memshare_model_test.cc explores every interleaving of small cases and
// random ones of larger cases.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/memshare.h"
#include "core/memshare_ledger.h"
#include "core/resource_plan.h"

namespace gpushare::memshare::model {

struct PodShape {
  std::vector<int64_t> app;   // units of each app container with units
  std::vector<int64_t> init;  // units of each init container with units
  std::vector<int64_t> core;  // compute share of each app container, in percent (missing: 0)
};

struct Config {
  std::vector<int64_t> gpu_units;  // the node's GPUs, in units
  std::vector<PodShape> pods;
  int scheduler_restarts = 0;  // at most this many restarts of each
  int agent_restarts = 0;
  int deletions = 0;  // at most this many pods deleted
  // The scheduler's count before issue 10's fix (annotations only: confirmed where confirmed,
  // planned elsewhere), to show that the checker finds the over-booking it caused.
  bool count_current_only = false;
  // The scheduler's clash check blind to compute shares (keys compared without them), to show
  // that the checker finds a container given another's share.
  bool core_blind_conflicts = false;
};

enum class EventKind {
  kReserve,
  kAnnotate,
  kBind,
  kSchedulerSees,
  kSchedulerRestart,
  kSchedulerMovesPlan,
  kAdmit,
  kDelete,
  kAgentSees,
  kAgentList,
  kAgentConfirm,
  kAgentRestart,
};

struct Event {
  EventKind kind = EventKind::kReserve;
  int pod = -1;
  std::vector<int> demand_gpus;  // kReserve: the GPU of each demand
  std::string Text() const;
};

class Model {
 public:
  explicit Model(Config config);
  Model(const Model& other);
  Model& operator=(const Model&) = delete;

  // Every event possible in the current state.
  std::vector<Event> Enabled() const;
  // Applies `e` (one of Enabled()); returns what went wrong if it broke the promise.
  std::optional<std::string> Apply(const Event& e);
  // The state, canonically encoded (equal states, equal keys).
  std::string Key() const;
  // Pods kubelet admitted, and pods bound in the API.
  int admitted() const;
  int bound() const;
  // What kubelet holds per GPU (units).
  std::vector<int64_t> HeldUnits() const;

 private:
  struct Api {
    bool exists = true;
    bool bound = false;
    std::map<std::string, std::string> annotations;
  };
  struct View {  // an informer's copy of a pod
    bool seen = false;
    Api pod;
  };
  enum class Stage { kNone, kReserved, kAnnotated, kBound };
  struct Bind {
    Stage stage = Stage::kNone;
    std::vector<int> demand_gpus;
    int64_t assume = 0;
  };
  struct Kubelet {
    bool admitted = false;
    std::map<std::string, std::vector<int>> units;  // container -> unit numbers (global)
  };
  struct Pod {
    PodRequest request;
    Api api;
    View sched, agent;
    Bind bind;
    Kubelet kubelet;
  };

  static bool Same(const View& v, const Api& a);
  std::string PodKey(int i) const { return "ns/p" + std::to_string(i); }
  std::string UnitId(int unit) const;
  int GpuOfUnit(int unit) const;
  // The scheduler's per-GPU count and pending keys, from its view and its binds in flight.
  struct Count {
    std::map<int, GpuUse> used;
    std::map<SlotKey, int> pending_keys;
    bool held_back = false;  // a restart guard holds the node
  };
  // Released slots the scheduler keeps counting, or (whole_node) a node it keeps shut after a
  // restart, until the pods in `waiting` are confirmed or gone.
  struct Guard {
    std::map<int, GpuUse> hold;
    bool whole_node = false;
    std::set<int> waiting;
  };
  Count SchedulerCount() const;
  bool Fits(int pod, const std::vector<int>& demand_gpus, const Count& count) const;
  void Assignments(int pod, const Count& count, std::vector<int>* gpus,
                   std::vector<Event>* out) const;
  SlotLedger AgentLedger(bool fresh_from_api, const std::set<std::string>* free = nullptr) const;
  void AgentPlans(bool fresh_from_api, std::vector<PlannedPod>* plans,
                  std::set<std::string>* foreign) const;
  std::optional<std::string> Step(const Event& e);
  bool PendingForScheduler(const Pod& p) const;
  std::set<int> PendingPods(int except) const;
  void PruneGuards();
  std::optional<std::string> Admit(int pod);
  // Compute shares kubelet holds beyond 100 % on a GPU (a violation), or nullopt.
  std::optional<std::string> ComputeOverBooked() const;
  std::map<std::string, std::vector<ObservedContainer>> PodResources() const;
  std::optional<std::map<std::string, std::string>> ConfirmChanges(int pod) const;
  // The plan moves the scheduler would make now (memshare::SettledPlanMoves), by pod key.
  std::map<std::string, ContainerGpus> SchedulerPlanMoves() const;

  // What never changes, shared by every copy of a model.
  struct Node {
    Config config;
    Inventory inventory;
    PlannedResource resource;
    std::vector<int> unit_gpu;  // global unit -> GPU index
  };
  static std::shared_ptr<const Node> MakeNode(Config config);
  std::shared_ptr<const Node> node_;
  const Config& config_;
  const Inventory& inventory_;
  const PlannedResource& resource_;
  const std::vector<int>& unit_gpu_;
  std::vector<int> unit_owner_;  // global unit -> pod holding it, -1 free
  std::vector<Pod> pods_;
  std::vector<Guard> guards_;
  KubeletHoldings holdings_;
  int64_t clock_ = 0;
  int64_t reserves_ = 0;  // the assume times: the order of the reservations
  int kubelet_changes_ = 0, listed_changes_ = 0;
  int scheduler_restarts_ = 0, agent_restarts_ = 0, deletions_ = 0;
};

}  // namespace gpushare::memshare::model
