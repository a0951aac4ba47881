// See allocate_events.h.
#include "node/allocate_events.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/logfmt.h"
#include "core/allocation_json.h"
#include "core/allocation_record.h"
#include "core/memshare.h"
#include "core/reasons.h"

namespace gpushare::node {

namespace {

constexpr size_t kMaxIdsShown = 8;
constexpr size_t kMaxGpusShown = 4;
constexpr size_t kMaxErrorChars = 200;  // of a failed list, in an Event message
constexpr int64_t kPageSize = 100;

std::string Clip(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::string Suppressed(uint64_t n) {
  if (n == 0) return "";
  return " (and " + std::to_string(n) + " more refusals for this reason since the last event)";
}

// Memory units grouped by GPU in first-seen order ("GPU-a: 4 units"); "" when an ID is not a unit.
std::string UnitsByGpu(const std::vector<std::string>& ids) {
  std::vector<std::pair<std::string, int64_t>> gpus;
  for (const std::string& id : ids) {
    Result<memshare::UnitId> u = memshare::ParseUnitDeviceId(id);
    if (!u.ok()) return "";
    auto it = gpus.begin();
    while (it != gpus.end() && it->first != u->gpu_uuid) ++it;
    if (it == gpus.end()) it = gpus.insert(gpus.end(), {u->gpu_uuid, 0});
    ++it->second;
  }
  std::string s;
  for (size_t i = 0; i < gpus.size() && i < kMaxGpusShown; ++i) {
    s += (i == 0 ? "" : ", ") + gpus[i].first + ": " + std::to_string(gpus[i].second) +
         (gpus[i].second == 1 ? " unit" : " units");
  }
  if (gpus.size() > kMaxGpusShown) s += ", ... (" + std::to_string(gpus.size()) + " GPUs)";
  return s;
}

// A pod as core/allocate_attribution.h sees it, for `resource`.
attribution::PodCandidate CandidateOf(const kube::Pod& p, const std::string& resource) {
  attribution::PodCandidate c;
  c.namespace_ = p.metadata.namespace_;
  c.name = p.metadata.name;
  c.uid = p.metadata.uid;
  c.node_name = p.spec.node_name;
  c.phase = p.status.phase;
  c.status_reason = p.status.reason;
  c.status_message = p.status.message;
  c.terminating = p.IsBeingDeleted();
  for (const auto* list : {&p.spec.init_containers, &p.spec.containers}) {
    for (const kube::Container& k : *list) {
      Result<int64_t> n = kube::ExtendedResourceCount(k, resource);
      c.containers.push_back({k.name, n.ok() ? *n : 0});
    }
  }
  auto a = p.metadata.annotations.find(std::string(alloc::kAllocationsAnnotation));
  if (a != p.metadata.annotations.end()) {
    Result<alloc::AllocationRecord> r = alloc::DecodeAllocationRecord(a->second);
    if (r.ok()) c.record = std::move(*r);
  }
  return c;
}

}  // namespace

PodLister NodePodLister(std::shared_ptr<kube::Client> client, std::string node) {
  return [client = std::move(client), node = std::move(node)](
             const kube::Cancellation* cancel) -> Result<std::vector<kube::Pod>> {
    kube::ListOptions o;
    o.field_selector = "spec.nodeName=" + node;
    o.resource_version = "0";
    o.limit = kPageSize;
    GPUSHARE_ASSIGN_OR_RETURN(kube::RawList list, client->List(kube::kPods, "", o, cancel));
    std::vector<kube::Pod> pods;
    for (const nlohmann::json& j : list.items) {
      Result<kube::Pod> p = kube::DecodePod(j);
      if (p.ok()) pods.push_back(std::move(*p));
    }
    return pods;
  };
}

AllocateEvents::AllocateEvents(std::shared_ptr<kube::EventRecorder> recorder,
                               AllocateEventsOptions options, std::shared_ptr<Clock> clock)
    : recorder_(std::move(recorder)), options_(std::move(options)), clock_(std::move(clock)) {
  if (options_.pods) thread_ = std::thread([this] { Run(); });
}

AllocateEvents::~AllocateEvents() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cancel_.Cancel();
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

std::string AllocateEvents::Devices(const std::vector<std::string>& ids) {
  if (std::string units = UnitsByGpu(ids); !units.empty()) return units;
  std::string devices;
  for (size_t i = 0; i < ids.size() && i < kMaxIdsShown; ++i)
    devices += (i == 0 ? "" : ",") + ids[i];
  if (ids.size() > kMaxIdsShown) devices += ",... (" + std::to_string(ids.size()) + " devices)";
  return devices;
}

std::string AllocateEvents::Message(const std::string& resource,
                                    const std::vector<std::string>& ids, const std::string& why,
                                    uint64_t suppressed) {
  return "Allocate of " + resource + " [" + Devices(ids) + "] refused: " + why +
         Suppressed(suppressed);
}

std::string AllocateEvents::PodMessage(const RefusalFacts& f,
                                       const std::vector<std::string>& containers) {
  std::string who = containers.size() == 1 ? "container " : "one of containers ";
  for (size_t i = 0; i < containers.size(); ++i) who += (i == 0 ? "" : ", ") + containers[i];
  return "Allocate of " + f.resource + " [" + Devices(f.device_ids) + "] for " + who +
         " refused: " + f.why + Suppressed(f.suppressed);
}

std::string AllocateEvents::NodeMessage(const RefusalFacts& f, const std::string& because) {
  return "Allocate of " + f.resource + " [" + Devices(f.device_ids) + "] refused: " + f.why +
         "; pod not identified: " + because + Suppressed(f.suppressed);
}

std::string AllocateEvents::Candidates(const RefusalFacts& f, const std::string& node,
                                       const std::vector<attribution::PodCandidate>& pods,
                                       const std::vector<attribution::PodMatch>& matches) {
  if (matches.empty()) {
    return "no pod in admission on " + node + " has a container asking for " +
           std::to_string(f.device_ids.size()) + " " + f.resource + " that it does not hold yet";
  }
  std::string s = std::to_string(matches.size()) + " pods could be it: ";
  for (size_t i = 0; i < matches.size() && i < kMaxCandidatesNamed; ++i) {
    const attribution::PodCandidate& p = pods[matches[i].pod];
    s += (i == 0 ? "" : ", ") + p.namespace_ + "/" + p.name;
  }
  if (matches.size() > kMaxCandidatesNamed)
    s += ", and " + std::to_string(matches.size() - kMaxCandidatesNamed) + " more";
  return s;
}

void AllocateEvents::OnAllocate(const deviceplugin::AllocateOutcome& outcome) {
  if (outcome.answered()) return;
  Refused(std::string(outcome.resource), outcome.reason,
          std::vector<std::string>(outcome.device_ids.begin(), outcome.device_ids.end()),
          std::string(outcome.message));
}

void AllocateEvents::Refused(const std::string& resource, std::string_view reason,
                             const std::vector<std::string>& device_ids,
                             const std::string& message) {
  RefusalFacts f{resource, std::string(reason), device_ids, message, 0};
  bool queued = false;
  {
    MutexLock l(&mu_);
    PerReason& r = reasons_[f.reason];
    const int64_t now = clock_->NowMs();
    if (r.last_ms >= 0 && now - r.last_ms < options_.interval_ms) {
      ++r.suppressed;
      ++stats_.rate_limited;
      return;
    }
    r.last_ms = now;
    f.suppressed = r.suppressed;
    r.suppressed = 0;
    if (options_.pods && !stopping_ && queue_.size() < options_.queue_limit) {
      queue_.push_back(std::move(f));
      queued = true;
    } else if (options_.pods) {
      ++stats_.dropped;
    }
  }
  if (queued) {
    cv_.NotifyAll();
    return;
  }
  Emit(f, false);  // no lookup: straight to the recorder's queue (never blocks)
}

void AllocateEvents::Run() {
  for (;;) {
    RefusalFacts f;
    bool lookup = false;
    {
      MutexLock l(&mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      if (queue_.empty()) return;
      f = std::move(queue_.front());
      queue_.pop_front();
      ++in_flight_;
      lookup = !stopping_;
    }
    Emit(f, lookup);
    {
      MutexLock l(&mu_);
      --in_flight_;
    }
    cv_.NotifyAll();
  }
}

void AllocateEvents::Count(uint64_t AllocateEventsStats::*field) {
  MutexLock l(&mu_);
  ++(stats_.*field);
}

void AllocateEvents::Emit(const RefusalFacts& f, bool lookup) {
  kube::Node node;
  node.metadata.name = options_.node_name;
  auto on_node = [&](const std::string& message) {
    recorder_->RecordNode(node, "Warning", f.reason, message);
    Count(&AllocateEventsStats::node_events);
  };
  if (!lookup) {
    on_node(Message(f.resource, f.device_ids, f.why, f.suppressed));
    return;
  }
  Result<std::vector<kube::Pod>> pods = options_.pods(&cancel_);
  if (!pods.ok()) {
    spdlog::warn("event=allocate_event_pod_lookup_failed reason={} error={}", f.reason,
                 logfmt::Value(pods.status().message()));
    Count(&AllocateEventsStats::lookup_failed);
    on_node(NodeMessage(f, "listing the pods of " + options_.node_name +
                               " failed: " + Clip(pods.status().message(), kMaxErrorChars)));
    return;
  }
  std::vector<attribution::PodCandidate> candidates;
  candidates.reserve(pods->size());
  for (const kube::Pod& p : *pods) candidates.push_back(CandidateOf(p, f.resource));
  // The gRPC message kubelet got (and may have written into a failed pod's status).
  const attribution::RefusedAllocate refused{options_.node_name, f.resource, f.device_ids.size(),
                                             reasons::Coded(f.reason, f.why)};
  const std::vector<attribution::PodMatch> matches =
      attribution::MatchRefusedAllocate(refused, candidates);
  if (matches.size() == 1) {
    const kube::Pod& pod = (*pods)[matches[0].pod];
    recorder_->RecordPod(pod, "Warning", f.reason, PodMessage(f, matches[0].containers));
    Count(&AllocateEventsStats::pod_events);
    spdlog::info("event=allocate_refusal_attributed reason={} pod={}", f.reason,
                 logfmt::Value(pod.Key()));
    return;
  }
  on_node(NodeMessage(f, Candidates(f, options_.node_name, candidates, matches)));
}

bool AllocateEvents::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  while (!queue_.empty() || in_flight_ > 0) {
    if (!cv_.WaitUntil(&mu_, deadline)) return queue_.empty() && in_flight_ == 0;
  }
  return true;
}

AllocateEventsStats AllocateEvents::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

}  // namespace gpushare::node
