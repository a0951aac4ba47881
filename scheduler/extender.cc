#include "scheduler/extender.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <set>
#include <string_view>
#include <unordered_set>

#include "base/logfmt.h"
#include "core/memshare.h"
#include "core/reasons.h"
#include "kube/errors.h"
#include "kube/memshare_pod.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

using logfmt::Value;
using json = nlohmann::json;
namespace ms = memshare;

namespace {

constexpr std::string_view kNotSynced =
    "cache not synced: gpushare-scheduler is still reading nodes and pods from the API server";

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string Ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string PodKey(const kube::Pod& p) {
  return p.metadata.namespace_ + "/" + p.metadata.name;
}
std::string Key(const BindingArgs& b) {
  return b.pod_namespace + "/" + b.pod_name;
}

// The request of a filter or prioritize call, decoded.
struct Decoded {
  ExtenderArgs args;
  kube::Pod pod;
  ms::PodRequest request;
  std::string error;  // a request that is well-formed but cannot be served
};

Result<Decoded> DecodeArgs(std::string_view body, std::string_view resource) {
  GPUSHARE_ASSIGN_OR_RETURN(ExtenderArgs a, ParseExtenderArgs(body));
  Decoded d;
  d.args = std::move(a);
  Result<kube::Pod> pod = kube::DecodePod(d.args.pod);
  if (!pod.ok()) return pod.status().WithContext("Pod");
  d.pod = std::move(*pod);
  Result<ms::PodRequest> req = kube::PodPlacementRequest(d.pod, resource);
  if (req.ok()) {
    d.request = std::move(*req);
  } else {
    d.error = req.status().message();
  }
  return d;
}

// Whether the filter passes only the policy's best nodes for `pod` (--filter-keep-best). A pod with
// soft placement preferences keeps every node that fits: kube-scheduler's score plugins weigh
// them, and prioritize adds the policy's ranking.
bool KeepsBest(const ExtenderOptions& o, const kube::Pod& pod, const ms::PodRequest& request) {
  return o.filter_keep_best > 0 && !request.empty() && !pod.spec.placement_preferences;
}

// --filter-keep-best: only the `keep` best of the nodes that passed, by the policy's scores.
void KeepBest(GpuCache& cache, size_t keep, const Decoded& d, FilterResult* r) {
  std::vector<std::string_view> passed;
  if (r->names_mode) {
    passed = r->node_names;
  } else {
    for (const json& n : r->nodes)
      passed.push_back(n.at("metadata").at("name").get_ref<const std::string&>());
  }
  if (passed.size() <= keep) return;
  const std::vector<int64_t> scores =
      cache.Score(d.request, passed, kube::PodCpuMemoryRequests(d.pod));
  std::vector<size_t> order(passed.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Best first; equal scores keep kube-scheduler's order.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  order.resize(keep);
  std::sort(order.begin(), order.end());
  if (r->names_mode) {
    std::vector<std::string_view> kept;
    for (size_t i : order) kept.push_back(r->node_names[i]);
    r->node_names = std::move(kept);
  } else {
    std::vector<json> kept;
    for (size_t i : order) kept.push_back(std::move(r->nodes[i]));
    r->nodes = std::move(kept);
  }
}

// Whether any container or init container names `resource` or alibabacloud.com/gpu-milli in
// its requests or limits (the interest test kube-scheduler applies before it calls an extender
// with managedResources).
bool NamesResource(const kube::Pod& pod, const std::string& resource) {
  const std::string milli(ms::kMilliResource);
  for (const auto* list : {&pod.spec.containers, &pod.spec.init_containers})
    for (const kube::Container& c : *list)
      for (const std::string* r : {&resource, &milli})
        if (c.resources.limits.count(*r) != 0 || c.resources.requests.count(*r) != 0) return true;
  return false;
}

std::string Join(const std::map<std::string, std::string>& m, size_t limit) {
  std::string out;
  size_t n = 0;
  for (const auto& [k, v] : m) {
    if (n++ == limit) return out + "; ...";
    out += (out.empty() ? "" : "; ") + k + ": " + v;
  }
  return out;
}

kube::ObjectReference PodRef(std::string ns, std::string name, std::string uid) {
  kube::ObjectReference r;
  r.api_version = "v1";
  r.kind = "Pod";
  r.namespace_ = std::move(ns);
  r.name = std::move(name);
  r.uid = std::move(uid);
  return r;
}

// Observes the time since its construction into a histogram when it goes out of scope.
class VerbTimer {
 public:
  VerbTimer(SchedulerMetrics* m, void (SchedulerMetrics::*observe)(double))
      : m_(m), observe_(observe), t0_(std::chrono::steady_clock::now()) {}
  ~VerbTimer() {
    if (m_ != nullptr)
      (m_->*observe_)(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  VerbTimer(const VerbTimer&) = delete;
  VerbTimer& operator=(const VerbTimer&) = delete;

 private:
  SchedulerMetrics* m_;
  void (SchedulerMetrics::*observe_)(double);
  std::chrono::steady_clock::time_point t0_;
};

// The placement codes in the order that breaks ties for the dominant one: what the pod lacks
// first, then why the node cannot take shares at all.
constexpr std::string_view kCodeOrder[] = {
    reasons::kGpuMemoryInsufficient, reasons::kNoGpuFitsContainer,  reasons::kClientCeilingReached,
    reasons::kGpuUnhealthy,          reasons::kPendingSlotConflict, reasons::kNodeHeldBack,
    reasons::kGpuExcluded,           reasons::kNoSharedGpu,         reasons::kNodeUnknown,
    reasons::kInvalidRequest};

size_t CodeRank(std::string_view code) {
  size_t i = 0;
  for (; i < std::size(kCodeOrder); ++i)
    if (kCodeOrder[i] == code) break;
  return i;
}

// The refused nodes per code, in the order the codes first appear.
std::vector<std::pair<std::string_view, size_t>> CountByCode(
    const std::vector<RefusedNode>& nodes) {
  std::vector<std::pair<std::string_view, size_t>> counts;
  for (const RefusedNode& n : nodes) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == n.code; });
    if (it == counts.end()) {
      counts.emplace_back(n.code, 1);
    } else {
      ++it->second;
    }
  }
  return counts;
}

}  // namespace

std::pair<std::string_view, std::string> FilterFailureMessage(
    size_t listed, const std::vector<RefusedNode>& nodes) {
  // Counts per code, in rank order.
  std::vector<std::pair<std::string_view, size_t>> counts = CountByCode(nodes);
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : CodeRank(a.first) < CodeRank(b.first);
  });
  const std::string_view dominant = counts.empty() ? reasons::kNodeUnknown : counts[0].first;
  std::string msg = "0/" + std::to_string(listed) + " nodes can take the pod (";
  for (size_t i = 0; i < counts.size(); ++i)
    msg += (i ? ", " : "") + std::to_string(counts[i].second) + " " + std::string(counts[i].first);
  msg += ")";
  // The dominant code's nodes first, in request order, then the others.
  std::vector<const RefusedNode*> order;
  for (const RefusedNode& n : nodes)
    if (n.code == dominant) order.push_back(&n);
  for (const RefusedNode& n : nodes)
    if (n.code != dominant) order.push_back(&n);
  constexpr size_t kMaxNodes = 3, kMaxReason = 400;
  size_t shown = 0;
  for (const RefusedNode* n : order) {
    std::string part = std::string(n->name) + ": " +
                       reasons::Coded(n->code, n->reason->size() > kMaxReason
                                                   ? n->reason->substr(0, kMaxReason) + "..."
                                                   : *n->reason);
    if (shown == kMaxNodes || msg.size() + part.size() + 2 > kMaxEventMessage - 24) break;
    msg += (shown ? "; " : ": ") + part;
    ++shown;
  }
  if (shown < order.size()) msg += "; and " + std::to_string(order.size() - shown) + " more";
  return {dominant, std::move(msg)};
}

void Extender::Warn(const kube::ObjectReference& pod, std::string_view reason,
                    const std::string& message) {
  if (options_.warn) options_.warn(pod, reason, message);
}

void Extender::FilterRefused(const kube::Pod& pod, const std::vector<std::string_view>& names,
                             const std::vector<NodeVerdict>& verdicts, size_t passed) {
  std::vector<RefusedNode> refused;
  for (size_t i = 0; i < names.size(); ++i) {
    if (verdicts[i].repeat || verdicts[i].kind == NodeVerdict::Kind::kFits) continue;
    refused.push_back({names[i], verdicts[i].code, &verdicts[i].reason});
  }
  if (options_.metrics != nullptr) {
    for (const auto& [code, n] : CountByCode(refused))
      options_.metrics->CountFilterRejections(code, static_cast<double>(n));
  }
  if (passed != 0 || refused.empty() || !options_.warn) return;
  size_t listed = 0;
  for (const NodeVerdict& v : verdicts) listed += v.repeat ? 0 : 1;
  auto [code, message] = FilterFailureMessage(listed, refused);
  Warn(PodRef(pod.metadata.namespace_, pod.metadata.name, pod.metadata.uid), code, message);
}

namespace {

PreemptOptions PreemptOptionsOf(const ExtenderOptions& o) {
  PreemptOptions p = o.preempt;
  p.resource_name = o.resource_name;
  p.pod_lookup = o.pod_lookup;
  p.clock = o.clock;
  p.metrics = o.metrics;
  p.warn = o.warn;
  return p;
}

}  // namespace

Extender::Extender(GpuCache& cache, std::shared_ptr<kube::Client> client, ExtenderOptions options)
    : cache_(cache),
      client_(std::move(client)),
      options_(std::move(options)),
      preemptor_(cache_, PreemptOptionsOf(options_)) {
  if (!options_.clock) options_.clock = RealClock();
}

ExtenderStats Extender::stats() const {
  return {.filter = filter_.load(),
          .filter_errors = filter_errors_.load(),
          .prioritize = prioritize_.load(),
          .prioritize_errors = prioritize_errors_.load(),
          .bind = bind_.load(),
          .bind_errors = bind_errors_.load(),
          .bind_idempotent = bind_idempotent_.load(),
          .bad_requests = bad_requests_.load(),
          .bind_ns_total = bind_ns_.load()};
}

HttpReply Extender::Filter(std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  const VerbTimer timer(options_.metrics, &SchedulerMetrics::ObserveFilter);
  filter_.fetch_add(1);
  FilterResult r;
  Result<Decoded> d = DecodeArgs(body, options_.resource_name);
  if (!d.ok()) {
    bad_requests_.fetch_add(1);
    filter_errors_.fetch_add(1);
    spdlog::warn("event=filter_bad_request error={}", Value(d.status().message()));
    r.error = "bad filter request: " + d.status().message();
    return {400, EncodeFilterResult(r)};
  }
  r.names_mode = d->args.names_mode();
  const std::string key = PodKey(d->pod);
  if (!d->error.empty()) {
    filter_errors_.fetch_add(1);
    r.error = d->error;
    spdlog::warn("event=filter_refused pod={} error={}", Value(key), Value(r.error));
    const size_t listed =
        d->args.node_names ? d->args.node_names->size() : d->args.CandidateNames().size();
    if (options_.metrics != nullptr)
      options_.metrics->CountFilterRejections(reasons::kInvalidRequest,
                                              static_cast<double>(listed));
    Warn(PodRef(d->pod.metadata.namespace_, d->pod.metadata.name, d->pod.metadata.uid),
         reasons::kInvalidRequest, "the pod's " + options_.resource_name + " request: " + d->error);
    return {200, EncodeFilterResult(r)};
  }
  if (!cache_.synced()) {
    filter_errors_.fetch_add(1);
    r.error = std::string(kNotSynced);
    spdlog::info("event=filter_refused pod={} error=\"cache not synced\"", Value(key));
    return {200, EncodeFilterResult(r)};
  }
  std::vector<std::string_view> listed;
  if (!d->args.node_names) listed = d->args.CandidateNames();
  const std::vector<std::string_view>& names = d->args.node_names ? *d->args.node_names : listed;
  std::vector<NodeVerdict> verdicts;
  if (d->request.empty()) {
    verdicts.assign(names.size(), NodeVerdict{});  // nothing to check: every node passes
    std::unordered_set<std::string_view> seen;
    for (size_t i = 0; i < names.size(); ++i) verdicts[i].repeat = !seen.insert(names[i]).second;
  } else {
    verdicts = cache_.Filter(d->request, names, Asker::Of(d->pod));
  }
  r.node_names.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (verdicts[i].repeat) continue;
    switch (verdicts[i].kind) {
      case NodeVerdict::Kind::kFits:
        if (r.names_mode) {
          r.node_names.push_back(names[i]);
        } else {
          // names[i] views this Node's name; moving the JSON value keeps its object (and the
          // name) where it is, so later reads of names[i] stay valid.
          r.nodes.push_back(std::move((*d->args.nodes)[i]));
        }
        break;
      case NodeVerdict::Kind::kFailed:
        // The code leads, so that kube-scheduler's FailedScheduling event shows it.
        r.failed[std::string(names[i])] = reasons::Coded(verdicts[i].code, verdicts[i].reason);
        break;
      case NodeVerdict::Kind::kUnresolvable:
        r.unresolvable[std::string(names[i])] =
            reasons::Coded(verdicts[i].code, verdicts[i].reason);
        break;
    }
  }
  const bool keep_best = KeepsBest(options_, d->pod, d->request);
  if (keep_best) KeepBest(cache_, static_cast<size_t>(options_.filter_keep_best), *d, &r);
  const size_t passed = r.names_mode ? r.node_names.size() : r.nodes.size();
  if (keep_best && passed == 1)
    Pick(d->pod, d->request,
         r.names_mode ? r.node_names[0]
                      : std::string_view(
                            r.nodes[0].at("metadata").at("name").get_ref<const std::string&>()));
  FilterRefused(d->pod, names, verdicts, passed);
  const double ms = MsSince(t0);
  if (passed == 0) {
    spdlog::info("event=filter pod={} nodes={} passed=0 failed={} unresolvable={} reasons={} ms={}",
                 Value(key), names.size(), r.failed.size(), r.unresolvable.size(),
                 Value(Join(r.failed.empty() ? r.unresolvable : r.failed, 3)), Ms(ms));
  } else {
    spdlog::debug("event=filter pod={} nodes={} passed={} failed={} unresolvable={} ms={}",
                  Value(key), names.size(), passed, r.failed.size(), r.unresolvable.size(), Ms(ms));
  }
  return {200, EncodeFilterResult(r)};
}

void Extender::Pick(const kube::Pod& pod, const memshare::PodRequest& request,
                    std::string_view node) {
  if (!options_.pick) return;
  const Status s = cache_.Pick(pod, request, std::string(node), options_.clock->UnixNs());
  if (!s.ok())
    spdlog::debug("event=pick_skipped pod={} node={} error={}", Value(PodKey(pod)), Value(node),
                  Value(s.message()));
}

HttpReply Extender::Prioritize(std::string_view body) {
  return Prioritize(body, false);
}

HttpReply Extender::PrioritizeCpuOnly(std::string_view body) {
  return Prioritize(body, true);
}

HttpReply Extender::Prioritize(std::string_view body, bool cpu_only_pods) {
  const auto t0 = std::chrono::steady_clock::now();
  const VerbTimer timer(options_.metrics, &SchedulerMetrics::ObservePrioritize);
  prioritize_.fetch_add(1);
  Result<Decoded> d = DecodeArgs(body, options_.resource_name);
  if (!d.ok()) {
    bad_requests_.fetch_add(1);
    prioritize_errors_.fetch_add(1);
    spdlog::warn("event=prioritize_bad_request error={}", Value(d.status().message()));
    return {400, EncodeError("bad prioritize request: " + d.status().message())};
  }
  if (!d->error.empty()) {
    prioritize_errors_.fetch_add(1);
    return {400, EncodeError(d->error)};
  }
  if (!cache_.synced()) {
    prioritize_errors_.fetch_add(1);
    return {503, EncodeError(kNotSynced)};
  }
  std::vector<std::string_view> listed;
  if (!d->args.node_names) listed = d->args.CandidateNames();
  const std::vector<std::string_view>& names = d->args.node_names ? *d->args.node_names : listed;
  std::vector<int64_t> scores(names.size(), 0);
  // Whether this verb ranks the pod: GPU pods for prioritize, the others for prioritize-cpu.
  const bool ranks = cpu_only_pods == d->request.empty();
  if (ranks) scores = cache_.Score(d->request, names, kube::PodCpuMemoryRequests(d->pod));
  if (ranks && !d->request.empty() && !KeepsBest(options_, d->pod, d->request)) {
    // The engine's choice (scored 10, and no other node is) is where kube-scheduler sends it
    // (the filter picked already when it kept the best node alone).
    for (size_t i = 0; i < names.size(); ++i)
      if (scores[i] == 10) {
        Pick(d->pod, d->request, names[i]);
        break;
      }
  }
  std::vector<HostPriority> out;
  out.reserve(names.size());
  std::unordered_set<std::string_view> seen;  // only for pods this verb does not rank
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ranks) {
      if (seen.insert(names[i]).second) out.push_back({names[i], 0});
    } else if (scores[i] >= 0) {
      out.push_back({names[i], scores[i]});
    }
  }
  spdlog::debug("event=prioritize pod={} nodes={} ms={}", Value(PodKey(d->pod)), names.size(),
                Ms(MsSince(t0)));
  return {200, EncodeHostPriorities(out)};
}

HttpReply Extender::Bind(std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  const VerbTimer timer(options_.metrics, &SchedulerMetrics::ObserveBind);
  bind_.fetch_add(1);
  Result<json> j = ParseBody(body);
  Result<BindingArgs> b = j.ok() ? DecodeBindingArgs(*j) : Result<BindingArgs>(j.status());
  if (!b.ok()) {
    bad_requests_.fetch_add(1);
    bind_errors_.fetch_add(1);
    spdlog::warn("event=bind_bad_request error={}", Value(b.status().message()));
    if (options_.metrics != nullptr) options_.metrics->CountBindFailure(reasons::kInvalidRequest);
    return {400, EncodeBindingResult("bad bind request: " + b.status().message())};
  }
  const Status bound = DoBind(*b);
  const std::string_view code = bound.reason().empty() ? reasons::kBindApiError : bound.reason();
  if (!bound.ok()) {
    bind_errors_.fetch_add(1);
    spdlog::warn("event=bind_failed pod={} node={} reason={} error={} ms={}", Value(Key(*b)),
                 Value(b->node), std::string(code), Value(bound.message()), Ms(MsSince(t0)));
    if (options_.metrics != nullptr) options_.metrics->CountBindFailure(code);
    // Not ready is passing (kube-scheduler retries); every other failure is the pod's news.
    if (code != reasons::kSchedulerNotReady)
      Warn(PodRef(b->pod_namespace, b->pod_name, b->pod_uid), code,
           "binding to node " + b->node + " failed: " + bound.message());
  } else {
    bind_ns_.fetch_add(static_cast<uint64_t>(MsSince(t0) * 1e6));
  }
  return {200, EncodeBindingResult(bound.message())};
}

Status Extender::DoBind(const BindingArgs& b) {
  const std::string key = Key(b);
  if (!cache_.synced())
    return Status::Unavailable(std::string(kNotSynced)).WithReason(reasons::kSchedulerNotReady);
  // kube-scheduler always sends the UID of the pod it scheduled; without it the bind could
  // land on another incarnation of the name.
  if (b.pod_uid.empty())
    return Status::InvalidArgument("PodUID: missing or empty (the bind must name the pod's UID)")
        .WithReason(reasons::kInvalidRequest);
  const auto t0 = std::chrono::steady_clock::now();
  GPUSHARE_ASSIGN_OR_RETURN(std::shared_ptr<const kube::Pod> pod, PodToBind(b));
  // Only pods that ask for the managed resource: the extender's RBAC may bind any pod, so this
  // endpoint must not become a way to place arbitrary pods on arbitrary nodes.
  if (!NamesResource(*pod, options_.resource_name))
    return Status::FailedPrecondition(
               "pod " + key + " does not request " + options_.resource_name + " or " +
               std::string(ms::kMilliResource) +
               " (in any container or init container); gpushare-scheduler binds only pods "
               "that do")
        .WithReason(reasons::kInvalidRequest);
  GPUSHARE_ASSIGN_OR_RETURN(const ms::PodRequest req,
                            WithReason(kube::PodPlacementRequest(*pod, options_.resource_name),
                                       reasons::kInvalidRequest));
  const std::string& bound_to = pod->spec.node_name;
  if (!bound_to.empty() && bound_to != b.node)
    return Status::FailedPrecondition("pod " + key + " is already bound to node " + bound_to)
        .WithReason(reasons::kBindPodChanged);
  if (req.empty()) return BindWithoutUnits(*pod, b);
  if (!bound_to.empty()) return RetriedBind(*pod, req, b);
  return BindWithGpus(*pod, req, b, t0);
}

Result<std::shared_ptr<const kube::Pod>> Extender::PodToBind(const BindingArgs& b) {
  const std::string key = Key(b);
  // The informer's copy when it is the same incarnation, else the API's.
  std::shared_ptr<const kube::Pod> pod;
  if (options_.pod_lookup) pod = options_.pod_lookup(key);
  if (!pod || pod->metadata.uid != b.pod_uid) {
    Result<kube::Pod> fresh = client_->GetPod(b.pod_namespace, b.pod_name);
    if (!fresh.ok()) {
      if (kube::IsNotFound(fresh.status()))
        return Status::NotFound("pod " + key + " not found").WithReason(reasons::kBindPodChanged);
      return fresh.status().WithContext("reading pod " + key).WithReason(reasons::kBindApiError);
    }
    pod = std::make_shared<const kube::Pod>(std::move(*fresh));
  }
  if (pod->metadata.uid != b.pod_uid)
    return Status::FailedPrecondition("pod " + key + " has UID " + pod->metadata.uid +
                                      ", the bind is for UID " + b.pod_uid +
                                      " (the pod was recreated)")
        .WithReason(reasons::kBindPodChanged);
  if (pod->IsBeingDeleted())
    return Status::FailedPrecondition("pod " + key + " is being deleted")
        .WithReason(reasons::kBindPodChanged);
  return pod;
}

Status Extender::BindWithoutUnits(const kube::Pod& pod, const BindingArgs& b) {
  // It names the resource with 0 units (so kube-scheduler calls us), and there is nothing
  // to place: bound as the default binder would, to a node that exists.
  if (!pod.spec.node_name.empty()) return Status::Ok();  // a retry: it is on that node
  if (options_.node_known && !options_.node_known(b.node))
    return Status::NotFound("node " + b.node + ": not seen by gpushare-scheduler's node informer")
        .WithReason(reasons::kNodeUnknown);
  Status s = client_->Bind({b.pod_name, b.pod_namespace, pod.metadata.uid, b.node, {}});
  if (!s.ok() && !(kube::IsConflict(s) || s.code() == StatusCode::kAlreadyExists))
    return s.WithContext("binding").WithReason(reasons::kBindApiError);
  spdlog::info("event=bind pod={} node={} gpu_mem=none", Value(Key(b)), Value(b.node));
  return Status::Ok();
}

Status Extender::RetriedBind(const kube::Pod& pod, const ms::PodRequest& req,
                             const BindingArgs& b) {
  // A retry of a bind this extender made (the reply was lost, kube-scheduler asks again): the
  // pod carries a GPU assignment written by gpushare. Anything else was bound by another
  // binder, and is not ours to annotate.
  if (ms::ResolveAssignment(pod.metadata.annotations, req).state == ms::AssignmentState::kNone)
    return Status::FailedPrecondition(
               "pod " + Key(b) + " is already bound to node " + pod.spec.node_name +
               ", not by gpushare-scheduler (it carries no GPU assignment); refusing to bind "
               "it again")
        .WithReason(reasons::kBindPodChanged);
  bind_idempotent_.fetch_add(1);
  spdlog::info("event=bind_idempotent pod={} node={} detail=\"already bound and annotated\"",
               Value(Key(b)), Value(b.node));
  return Status::Ok();
}

Status Extender::BindWithGpus(const kube::Pod& pod, const ms::PodRequest& req, const BindingArgs& b,
                              std::chrono::steady_clock::time_point t0) {
  const std::string key = Key(b);
  const std::string& node = b.node;
  GPUSHARE_ASSIGN_OR_RETURN(const Reservation r,
                            cache_.Reserve(pod, req, node, options_.clock->UnixNs()));
  if (r.already) {
    bind_idempotent_.fetch_add(1);
    spdlog::info("event=bind_idempotent pod={} node={} gpus={}", Value(key), Value(node),
                 Value(ms::EncodeContainerGpus(r.containers)));
    return Status::Ok();
  }
  // One write: the API server copies a Binding's annotations onto the pod in the update that
  // sets spec.nodeName (pkg/registry/core/pod/storage: setPodNodeAndMetadata), and the UID is
  // its precondition. So the GPU assignment and the node land together or not at all: no pod
  // is ever seen annotated but unbound, and a failed bind leaves nothing to undo.
  const auto annotations = ms::BindAnnotations(r.request, r.demand_gpus, r.dev_units, r.assume_ns);
  if (Status s = BindOrRollback(pod.metadata.uid, b, r.token, annotations, req); !s.ok()) {
    // 409: bound meanwhile (to another node, or it is another pod); else the API failed.
    const bool changed =
        kube::IsConflict(s) || s.code() == StatusCode::kAlreadyExists || kube::IsNotFound(s);
    return std::move(s).WithReason(changed ? reasons::kBindPodChanged : reasons::kBindApiError);
  }
  cache_.Commit(pod.metadata.uid, r.token);
  spdlog::info("event=bind pod={} node={} gpus={} units={} ms={}", Value(key), Value(node),
               Value(ms::EncodeContainerGpus(r.containers)), r.request.PodUnits(), Ms(MsSince(t0)));
  return Status::Ok();
}

Status Extender::BindOrRollback(const std::string& uid, const BindingArgs& b, uint64_t token,
                                const std::map<std::string, std::string>& annotations,
                                const ms::PodRequest& req) {
  const std::string& ns = b.pod_namespace;
  const std::string& name = b.pod_name;
  const std::string& node = b.node;
  Status s = client_->Bind({name, ns, uid, node, annotations});
  if (s.ok()) return s;
  if (kube::IsConflict(s) || s.code() == StatusCode::kAlreadyExists) {
    // Our own earlier bind whose reply was lost carried the assignment with it.
    Result<kube::Pod> now = client_->GetPod(ns, name);
    if (now.ok() && now->spec.node_name == node && now->metadata.uid == uid &&
        ms::ResolveAssignment(now->metadata.annotations, req).state != ms::AssignmentState::kNone)
      return Status::Ok();
  }
  cache_.Rollback(uid, token);
  return s.WithContext("binding pod " + Key(b) + " to node " + node);
}

}  // namespace gpushare::scheduler
