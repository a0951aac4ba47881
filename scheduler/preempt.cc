#include "scheduler/preempt.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>
#include <unordered_map>

#include "base/logfmt.h"
#include "core/object_key.h"
#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "kube/pod_requests.h"
#include "kube/timestamps.h"

namespace gpushare::scheduler {

using logfmt::Value;
namespace ms = memshare;
namespace pl = placement;

namespace {

int64_t StartNs(const kube::Pod& pod) {
  if (pod.status.start_time.empty()) return 0;
  Result<std::chrono::system_clock::time_point> t = kube::ParseTimestamp(pod.status.start_time);
  if (!t.ok()) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t->time_since_epoch()).count();
}

std::string Explain(pl::NoVictims why, const ms::PodRequest& request, pl::BudgetMode mode) {
  switch (why) {
    case pl::NoVictims::kFitsAfterTermination:
      return "pods being deleted there free enough already: nothing to evict";
    case pl::NoVictims::kNoLowerPriority:
      return "no pod of lower priority holds a GPU share there";
    case pl::NoVictims::kBudgets:
      return std::string(
                 "every GPU that evictions could free would break a "
                 "PodDisruptionBudget") +
             (mode == pl::BudgetMode::kRespect ? " (--preemption-budgets=respect)" : "");
    case pl::NoVictims::kDoesNotFit:
    case pl::NoVictims::kNone:
      break;
  }
  std::string demands;
  if (request.milli()) {
    for (const auto& c : request.app)
      demands += (demands.empty() ? "" : ", ") + std::to_string(c.milli);
    return "even with every pod of lower priority gone, no GPU would have room for the pod's " +
           demands + " milli-GPU";
  }
  for (int64_t d : request.Demands()) demands += (demands.empty() ? "" : ", ") + std::to_string(d);
  return "even with every pod of lower priority gone, no GPU would have room for the pod's " +
         demands + " unit(s)";
}

kube::ObjectReference PodRef(const kube::Pod& p) {
  kube::ObjectReference r;
  r.api_version = "v1";
  r.kind = "Pod";
  r.namespace_ = p.metadata.namespace_;
  r.name = p.metadata.name;
  r.uid = p.metadata.uid;
  return r;
}

// The budgets that count `pod` (kube-scheduler's reading; a pod already in a budget's
// disruptedPods is not counted against it again).
std::vector<int> BudgetsOf(
    const kube::Pod& pod,
    const std::vector<std::shared_ptr<const kube::PodDisruptionBudget>>& all) {
  std::vector<int> out;
  for (size_t b = 0; b < all.size(); ++b) {
    const kube::PodDisruptionBudget& pdb = *all[b];
    if (!pdb.Covers(pod.metadata.namespace_, pod.metadata.labels)) continue;
    if (pdb.disrupted_pods.count(pod.metadata.name) != 0) continue;
    out.push_back(static_cast<int>(b));
  }
  return out;
}

// One node's candidate: the input the choice was made on, its figures, the victims' pods.
struct Candidate {
  std::string node;
  pl::VictimSet set;
  std::vector<std::string> uids;
};

}  // namespace

Preemptor::Preemptor(GpuCache& cache, PreemptOptions options)
    : cache_(cache), options_(std::move(options)) {
  if (!options_.clock) options_.clock = RealClock();
}

Result<PreemptDecision> Preemptor::Decide(const kube::Pod& pod, const ms::PodRequest& request,
                                          const std::map<std::string, NodeVictims>& proposed) {
  PreemptDecision d;
  std::vector<std::string_view> names;
  names.reserve(proposed.size());
  for (const auto& [node, v] : proposed) names.push_back(node);
  const Asker asker = Asker::Of(pod);
  GPUSHARE_ASSIGN_OR_RETURN(PreemptionView view, cache_.ViewForPreemption(request, asker, names));
  const std::vector<std::shared_ptr<const kube::PodDisruptionBudget>> budgets =
      options_.budget_list ? options_.budget_list()
                           : std::vector<std::shared_ptr<const kube::PodDisruptionBudget>>{};
  std::vector<int32_t> allowed;
  allowed.reserve(budgets.size());
  for (const auto& b : budgets) allowed.push_back(b->disruptions_allowed);
  // Pods by UID, read once, only when kube-scheduler names victims the cache does not book.
  std::unordered_map<std::string, std::shared_ptr<const kube::Pod>> by_uid;
  bool listed = false;
  auto pod_by_uid = [&](const std::string& uid) -> std::shared_ptr<const kube::Pod> {
    if (!listed && options_.pod_list) {
      for (auto& p : options_.pod_list()) by_uid.emplace(p->metadata.uid, p);
      listed = true;
    }
    const auto it = by_uid.find(uid);
    return it == by_uid.end() ? nullptr : it->second;
  };

  // The namespaces that have budgets: only their pods are looked up for their labels.
  std::set<std::string_view> budgeted;
  for (const auto& b : budgets) budgeted.insert(b->metadata.namespace_);
  std::optional<Candidate> best;
  for (PreemptionNodeView& v : view.nodes) {
    if (!v.usable) {
      d.refused[v.name] = v.problem;
      continue;
    }
    pl::PreemptionInput& in = v.input;
    in.allowed = allowed;
    in.mode = options_.budgets;
    const size_t booked = in.pods.size();
    // The informer's copy of pod i, read only where needed (budgets, CPU and memory).
    std::vector<std::shared_ptr<const kube::Pod>> objects(booked);
    auto object = [&](size_t i) -> const kube::Pod* {
      if (i >= booked) return objects[i].get();
      if (!objects[i] && options_.pod_lookup) {
        std::shared_ptr<const kube::Pod> o = options_.pod_lookup(std::string(v.Key(i)));
        if (o && o->metadata.uid == v.Uid(i)) objects[i] = std::move(o);
      }
      return objects[i].get();
    };
    if (!budgeted.empty()) {
      for (size_t i = 0; i < booked; ++i) {
        const std::string_view key = v.Key(i);
        if (!budgeted.count(ObjectKey::NamespaceOf(key))) continue;
        if (const kube::Pod* o = object(i)) in.pods[i].budgets = BudgetsOf(*o, budgets);
      }
    }
    // kube-scheduler's victims: those the cache books here, and those that hold no GPU share
    // here (chosen for other resources: they stay victims).
    const NodeVictims& theirs = proposed.at(v.name);
    std::vector<size_t> theirs_idx, extra;
    std::vector<std::string> uids;  // of the extra pods, after the booked ones
    // Where each of kube-scheduler's victims is among the booked pods (booked: its index).
    std::vector<std::pair<std::string_view, size_t>> where;
    for (const std::string& uid : theirs.uids) where.emplace_back(uid, booked);
    std::sort(where.begin(), where.end());
    for (size_t i = 0; i < booked && !where.empty(); ++i) {
      const std::string_view uid = v.Uid(i);
      auto w = std::lower_bound(where.begin(), where.end(), std::make_pair(uid, size_t{0}));
      if (w != where.end() && w->first == uid) w->second = i;
    }
    for (const std::string& uid : theirs.uids) {
      size_t at = std::lower_bound(where.begin(), where.end(),
                                   std::make_pair(std::string_view(uid), size_t{0}))
                      ->second;
      if (at == booked) {
        std::shared_ptr<const kube::Pod> o = pod_by_uid(uid);
        pl::PreemptionPod p;
        p.evictable = false;  // never chosen by the GPUs; kept as kube-scheduler's
        if (o) {
          p.priority = o->spec.priority;
          p.start_ns = StartNs(*o);
          p.terminating = o->IsBeingDeleted();
          p.budgets = BudgetsOf(*o, budgets);
          const kube::CpuMemory r = kube::PodCpuMemoryRequests(*o);
          p.cpu_milli = r.cpu_milli;
          p.memory_bytes = r.memory_bytes;
        }
        at = in.Add(std::move(p));
        objects.push_back(std::move(o));
        uids.push_back(uid);
        extra.push_back(at);
      }
      theirs_idx.push_back(at);
    }
    pl::NoVictims why = pl::NoVictims::kNone;
    std::optional<pl::VictimSet> chosen = pl::ChooseVictims(in, v.shape, pod.spec.priority, &why);
    if (!chosen) {
      d.refused[v.name] = Explain(why, request, options_.budgets);
      continue;
    }
    std::vector<size_t> victims = chosen->victims;
    victims.insert(victims.end(), extra.begin(), extra.end());
    // As much CPU and memory freed as kube-scheduler's own set frees (it chose that set for
    // every resource, not only for the node's total of GPU memory).
    auto freed = [&](const std::vector<size_t>& set) {
      kube::CpuMemory f;
      for (size_t i : set) {
        f.cpu_milli += in.pods[i].cpu_milli;
        f.memory_bytes += in.pods[i].memory_bytes;
      }
      return f;
    };
    const kube::CpuMemory need = freed(theirs_idx);
    kube::CpuMemory have = freed(victims);
    for (size_t i : theirs_idx) {
      if (have.cpu_milli >= need.cpu_milli && have.memory_bytes >= need.memory_bytes) break;
      if (std::find(victims.begin(), victims.end(), i) != victims.end()) continue;
      victims.push_back(i);
      have = freed(victims);
    }
    std::stable_sort(victims.begin(), victims.end(), [&](size_t a, size_t b) {
      return pl::MoreImportantVictim(in.pods[a], in.pods[b]);
    });
    pl::VictimSet set = pl::MeasureVictims(in, victims);
    set.gpus = chosen->gpus;
    if (options_.budgets == pl::BudgetMode::kRespect && set.violations > 0) {
      d.refused[v.name] = Explain(pl::NoVictims::kBudgets, request, options_.budgets);
      continue;
    }
    if (best && !pl::BetterVictims(set, best->set)) continue;
    Candidate c;
    c.node = v.name;
    for (size_t i : set.victims)
      c.uids.push_back(i < booked ? std::string(v.Uid(i)) : uids[i - booked]);
    c.set = std::move(set);
    best = std::move(c);
  }
  if (!best) return d;
  GPUSHARE_ASSIGN_OR_RETURN(Nomination held,
                            cache_.Nominate(pod, request, best->node, best->set.gpus, best->uids,
                                            options_.clock->UnixNs()));
  d.node = best->node;
  d.victims = best->uids;
  d.pdb_violations = best->set.violations;
  d.gpus = held.gpus;
  return d;
}

HttpReply Preemptor::Preempt(std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Timer {
    SchedulerMetrics* m;
    std::chrono::steady_clock::time_point t0;
    ~Timer() {
      if (m != nullptr)
        m->ObservePreempt(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } timer{options_.metrics, t0};
  Result<nlohmann::json> j = ParseBody(body);
  Result<PreemptionArgs> a = j.ok() ? DecodePreemptionArgs(*j) : Result<PreemptionArgs>(j.status());
  Result<kube::Pod> pod = a.ok() ? kube::DecodePod(a->pod) : Result<kube::Pod>(a.status());
  if (a.ok() && !pod.ok()) pod = pod.status().WithContext("Pod");
  if (!pod.ok()) {
    spdlog::warn("event=preempt_bad_request error={}", Value(pod.status().message()));
    return {400, EncodeError("bad preempt request: " + pod.status().message())};
  }
  const std::string key = pod->metadata.namespace_ + "/" + pod->metadata.name;
  Result<ms::PodRequest> req = kube::PodPlacementRequest(*pod, options_.resource_name);
  if (!req.ok()) return {400, EncodeError(req.status().message())};
  if (req->empty()) {
    // Nothing of the managed resource to place: kube-scheduler's own choice stands.
    return {200, EncodePreemptionResult(a->nodes)};
  }
  if (!cache_.synced()) return {503, EncodeError("cache not synced")};
  if (options_.budgets_synced && !options_.budgets_synced())
    return {503, EncodeError("PodDisruptionBudgets not listed yet")};
  Result<PreemptDecision> d = Decide(*pod, *req, a->nodes);
  if (!d.ok()) {
    const int code = d.status().code() == StatusCode::kUnavailable ? 503 : 400;
    spdlog::warn("event=preempt_failed pod={} error={}", Value(key), Value(d.status().message()));
    return {code, EncodeError(d.status().message())};
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, NodeVictims> reply;
  if (options_.metrics != nullptr)
    options_.metrics->CountPreemption(!d->node.empty(), d->victims.size());
  if (d->node.empty()) {
    std::string why;
    size_t shown = 0;
    for (const auto& [node, reason] : d->refused) {
      if (shown++ == 3) {
        why += "; and " + std::to_string(d->refused.size() - 3) + " more";
        break;
      }
      why += (why.empty() ? "" : "; ") + node + ": " + reason;
    }
    spdlog::info("event=preempt pod={} nodes={} chosen=none reasons={} ms={:.3f}", Value(key),
                 a->nodes.size(), Value(why), ms);
    if (options_.warn)
      options_.warn(PodRef(*pod), reasons::kPreemptionNotHelpful,
                    "evicting pods of lower priority would free no GPU for the pod on any of the " +
                        std::to_string(a->nodes.size()) + " nodes kube-scheduler proposed: " + why);
    return {200, EncodePreemptionResult(reply)};
  }
  NodeVictims& v = reply[d->node];
  v.uids = d->victims;
  v.pdb_violations = d->pdb_violations;
  spdlog::info(
      "event=preempt pod={} nodes={} chosen={} victims={} pdb_violations={} gpus={} ms={:.3f}",
      Value(key), a->nodes.size(), Value(d->node), d->victims.size(), d->pdb_violations,
      Value(ms::EncodeContainerGpus(d->gpus)), ms);
  return {200, EncodePreemptionResult(reply)};
}

}  // namespace gpushare::scheduler
