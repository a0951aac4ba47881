// `gpushare replay`: a trace through a real cluster's API server, kube-scheduler and
// gpushare-scheduler, reported from the cluster's own state in `gpushare simulate`'s formats.
//
// For each seed: the trace's pods (sim::ReplayPodJson) are created one at a time in the order
// `gpushare simulate` submits them (sim::SubmitOrder); a watch on the replay's pods says when
// each is bound (its node and gpushare.io/gpu-mem-assumed) or found unschedulable (PodScheduled
// False, reason Unschedulable: then it is deleted, as the simulator never retries a failed pod);
// sim::ReplayTally turns that into the simulator's curve. Every pod is deleted at the end of the
// seed (and on SIGINT/SIGTERM). The policy is gpushare-scheduler's (--policy names it for the
// report; scripts/e2e-scale.sh policy NAME sets it on the scale harness).
#include "sim/replay.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>

#include "base/sync.h"
#include "cli/gpushare/api_client.h"
#include "cli/gpushare/command.h"
#include "config/flag_checks.h"
#include "core/memshare.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "sim/experiment.h"
#include "sim/report.h"

namespace {

using json = nlohmann::json;
namespace sim = gpushare::sim;
namespace kube = gpushare::kube;
using gpushare::Result;
using gpushare::Status;

constexpr kube::ResourceRef kNamespaces{"namespaces", false};
constexpr kube::ResourceRef kServiceAccounts{"serviceaccounts", true};
constexpr std::string_view kRunLabel = "gpushare.io/replay";

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop.store(true);
}

// Whether a failed call may succeed when made again: the API server unreachable, restarting or
// overloaded (kube/errors.h: 429, 5xx, transport errors, timeouts).
bool Transient(const Status& s) {
  return s.code() == gpushare::StatusCode::kUnavailable ||
         s.code() == gpushare::StatusCode::kDeadlineExceeded;
}

// Calls `call` until it succeeds, fails for good, `budget` has passed or the run is stopped;
// 0.2 s between tries, doubling up to 2 s. For the API server restarting under a replay.
template <class Call>
auto Retrying(Call&& call, std::chrono::seconds budget) -> decltype(call()) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto wait = std::chrono::milliseconds(200);
  for (;;) {
    auto r = call();
    Status s = Status::Ok();
    if constexpr (std::is_same_v<decltype(r), Status>) {
      s = r;
    } else {
      if (!r.ok()) s = r.status();
    }
    if (s.ok() || !Transient(s) || g_stop.load() ||
        std::chrono::steady_clock::now() + wait >= deadline)
      return r;
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(2000));
  }
}

struct Flags {
  std::string nodes, pods, policy = "default", seeds = "42", out = "replay-out";
  std::string namespace_ = "gpushare-replay", kubeconfig, context, scheduler_name;
  double tune = 1.3;
  double pod_timeout_s = 60;
  double api_retry_s = 120;
  bool expect_running = false;
  bool quiet = false;
};

// What the watch has seen of one pod.
struct Seen {
  std::string node;
  std::string assumed;  // gpushare.io/gpu-mem-assumed
  bool unschedulable = false;
  std::string message;  // PodScheduled's message when unschedulable
};

// Watches the run's pods and hands each one's outcome to the waiting creator.
class Watcher {
 public:
  Watcher(std::shared_ptr<kube::Client> c, std::string ns, std::string selector)
      : client_(std::move(c)), ns_(std::move(ns)), selector_(std::move(selector)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() {
    cancel_.Cancel();
    thread_.join();
  }
  // The pod's outcome once bound or unschedulable; nullopt after `timeout` or a stop.
  std::optional<Seen> Wait(const std::string& name, std::chrono::milliseconds timeout)
      GPUSHARE_EXCLUDES(mu_) {
    gpushare::MutexLock l(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!g_stop.load()) {
      auto it = seen_.find(name);
      if (it != seen_.end() && (!it->second.node.empty() || it->second.unschedulable)) {
        Seen s = it->second;
        seen_.erase(it);
        return s;
      }
      if (!cv_.WaitUntil(&mu_, std::min(deadline, std::chrono::steady_clock::now() +
                                                      std::chrono::milliseconds(200))) &&
          std::chrono::steady_clock::now() >= deadline)
        return std::nullopt;
    }
    return std::nullopt;
  }
  std::string error() const GPUSHARE_EXCLUDES(mu_) {
    gpushare::MutexLock l(&mu_);
    return error_;
  }

 private:
  void Take(const json& pod) GPUSHARE_EXCLUDES(mu_) {
    const json& meta = pod.value("metadata", json::object());
    const std::string name = meta.value("name", "");
    if (name.empty()) return;
    Seen s;
    s.node = pod.value("spec", json::object()).value("nodeName", "");
    const json ann = meta.value("annotations", json::object());
    s.assumed = ann.value(std::string(gpushare::memshare::kAssumedAnnotation), "");
    for (const json& c : pod.value("status", json::object()).value("conditions", json::array()))
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
          c.value("reason", "") == "Unschedulable") {
        s.unschedulable = true;
        s.message = c.value("message", "");
      }
    {
      gpushare::MutexLock l(&mu_);
      seen_[name] = std::move(s);
    }
    cv_.NotifyAll();
  }
  void Run() {
    std::string rv;
    while (!cancel_.cancelled()) {
      if (rv.empty()) {
        kube::ListOptions lo;
        lo.label_selector = selector_;
        Result<kube::RawList> list = client_->List(kube::kPods, ns_, lo, &cancel_);
        if (!list.ok()) {
          Note(list.status());
          cancel_.SleepFor(std::chrono::seconds(1));
          continue;
        }
        for (const json& p : list->items) Take(p);
        rv = list->resource_version;
      }
      kube::WatchOptions wo;
      wo.label_selector = selector_;
      wo.resource_version = rv;
      wo.timeout_seconds = 120;
      Status s = client_->Watch(
          kube::kPods, ns_, wo,
          [&](kube::WatchEvent&& e) {
            if (e.type == kube::WatchEventType::kError) {
              rv.clear();
              return false;
            }
            const std::string v =
                e.object.value("metadata", json::object()).value("resourceVersion", "");
            if (!v.empty()) rv = v;
            if (e.type == kube::WatchEventType::kAdded || e.type == kube::WatchEventType::kModified)
              Take(e.object);
            return true;
          },
          &cancel_);
      if (!s.ok() && !cancel_.cancelled()) {
        if (kube::IsExpired(s)) rv.clear();
        Note(s);
        cancel_.SleepFor(std::chrono::milliseconds(200));
      }
    }
  }
  void Note(const Status& s) GPUSHARE_EXCLUDES(mu_) {
    gpushare::MutexLock l(&mu_);
    error_ = s.message();
  }

  std::shared_ptr<kube::Client> client_;
  std::string ns_, selector_;
  kube::Cancellation cancel_;
  mutable gpushare::Mutex mu_;
  gpushare::CondVar cv_;
  std::map<std::string, Seen> seen_ GPUSHARE_GUARDED_BY(mu_);
  std::string error_ GPUSHARE_GUARDED_BY(mu_);
  std::thread thread_;
};

void Progress(std::FILE* err, uint64_t seed, size_t done, size_t total, int64_t refused,
              double seconds) {
  const size_t width = 30;
  const size_t filled = total > 0 ? done * width / total : width;
  std::string bar(filled, '=');
  bar.resize(width, ' ');
  std::fprintf(err, "\r[%s] seed %llu: %zu/%zu pods, %lld unschedulable, %.0f s", bar.c_str(),
               static_cast<unsigned long long>(seed), done, total, static_cast<long long>(refused),
               seconds);
  if (done == total) std::fprintf(err, "\n");
  std::fflush(err);
}

// Waits (bounded) until every pod of the run bound to a node is Running; the error names the
// count and one pod that is not, with its phase.
Status AwaitRunning(kube::Client& c, const std::string& ns, const std::string& selector,
                    std::chrono::seconds budget, int64_t* running) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::string first;
  size_t waiting = 0;
  for (;;) {
    kube::ListOptions lo;
    lo.label_selector = selector;
    Result<kube::RawList> list = Retrying([&] { return c.List(kube::kPods, ns, lo); }, budget);
    if (!list.ok()) return list.status().WithContext("listing the replay's pods");
    waiting = 0;
    *running = 0;
    for (const json& p : list->items) {
      if (p.value("spec", json::object()).value("nodeName", "").empty()) continue;
      const std::string phase = p.value("status", json::object()).value("phase", "");
      if (phase == "Running") {
        ++*running;
        continue;
      }
      if (waiting++ == 0)
        first = p["metadata"].value("name", "") + " (" + (phase.empty() ? "no phase" : phase) + ")";
    }
    if (waiting == 0) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline || g_stop.load()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return Status::DeadlineExceeded(std::to_string(waiting) + " bound pod(s) not Running after " +
                                  std::to_string(budget.count()) + " s, e.g. " + first);
}

// Deletes every pod of the run and waits until they are gone (bounded).
Status Cleanup(kube::Client& c, const std::string& ns, const std::string& selector) {
  kube::DeleteOptions d;
  d.grace_period_seconds = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    kube::ListOptions lo;
    lo.label_selector = selector;
    Result<kube::RawList> list = c.List(kube::kPods, ns, lo);
    if (!list.ok() && Transient(list.status())) {  // the API server restarting: try again
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (!list.ok()) return list.status().WithContext("listing the replay's pods");
    if (list->items.empty()) return Status::Ok();
    for (const json& p : list->items) {
      const std::string name = p["metadata"].value("name", "");
      if (p["metadata"].contains("deletionTimestamp")) continue;
      Status s = c.Delete(kube::kPods, ns, name, d);
      if (!s.ok() && !kube::IsNotFound(s) && !Transient(s))
        return s.WithContext("deleting pod " + name);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return Status::DeadlineExceeded("the replay's pods were not gone after 10 minutes");
}

std::vector<int> GpusOf(const std::string& assumed, std::string* problem) {
  std::vector<int> out;
  if (assumed.empty()) return out;
  Result<gpushare::memshare::ContainerGpus> m = gpushare::memshare::DecodeContainerGpus(assumed);
  if (!m.ok()) {
    *problem = "gpushare.io/gpu-mem-assumed: " + m.status().message();
    return out;
  }
  for (const auto& [c, g] : *m) out.push_back(g);
  return out;
}

int Replay(const Flags& f) {
  auto seeds = sim::ParseSeeds(f.seeds);
  if (!seeds.ok()) {
    std::fprintf(stderr, "gpushare replay: %s\n", seeds.status().message().c_str());
    return 2;
  }
  Result<sim::Workload> w = sim::LoadWorkload(f.nodes, f.pods);
  if (!w.ok()) {
    std::fprintf(stderr, "gpushare replay: %s\n", w.status().message().c_str());
    return 1;
  }
  kube::ClientOptions co;
  co.user_agent = "gpushare-replay";
  co.qps = 0;  // one pod at a time: the cluster, not a client limit, sets the pace
  std::optional<gpushare::cli::ApiClient> api =
      gpushare::cli::ConnectApi("replay", f.kubeconfig, f.context, co);
  if (!api) return 2;
  const kube::ClientConfig* cfg = &api->config;
  std::shared_ptr<kube::Client> client = api->client;
  kube::Client& c = *client;
  // Every node of the list must be in the cluster and schedulable (the figures are over the
  // list's capacity: a node that takes no pods would count as the policy's loss).
  {
    Result<kube::RawList> nodes = c.List(kube::kNodes, "", {});
    if (!nodes.ok()) {
      std::fprintf(stderr, "gpushare replay: listing nodes: %s (server %s)\n",
                   nodes.status().message().c_str(), cfg->server.c_str());
      return 1;
    }
    std::map<std::string, std::string> why_not;  // node -> "" when schedulable
    for (const json& n : nodes->items) {
      const std::string name = n["metadata"].value("name", "");
      std::string why;
      const json spec = n.value("spec", json::object());
      if (spec.value("unschedulable", false)) why = "cordoned";
      for (const json& t : spec.value("taints", json::array()))
        if (why.empty() && t.value("effect", "") != "PreferNoSchedule")
          why = "taint " + t.value("key", "") + ":" + t.value("effect", "");
      bool ready = false;
      for (const json& cnd : n.value("status", json::object()).value("conditions", json::array()))
        ready = ready || (cnd.value("type", "") == "Ready" && cnd.value("status", "") == "True");
      if (why.empty() && !ready) why = "not Ready";
      why_not[name] = why;
    }
    size_t bad = 0;
    std::string first;
    for (const auto& n : w->nodes) {
      const auto it = why_not.find(n.name);
      const std::string why = it == why_not.end() ? "not in the cluster" : it->second;
      if (!why.empty() && bad++ == 0) first = n.name + ": " + why;
    }
    if (bad > 0) {
      std::fprintf(stderr,
                   "gpushare replay: %zu node(s) of %s cannot take pods (first: %s); the figures "
                   "would not be the cluster's\n",
                   bad, f.nodes.c_str(), first.c_str());
      return 1;
    }
  }
  const json ns_body = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", f.namespace_}}}};
  Result<json> ns = c.Create(kNamespaces, "", ns_body);
  // A namespace still terminating (an earlier replay's, deleted as it ended) takes no pods:
  // wait until it is gone (bounded), then create it afresh.
  for (int i = 0; !ns.ok() && ns.status().code() == gpushare::StatusCode::kAlreadyExists; ++i) {
    Result<json> old = c.Get(kNamespaces, "", f.namespace_);
    if (old.ok() && !old->value("metadata", json::object()).contains("deletionTimestamp")) break;
    if (i == 240) {
      std::fprintf(stderr, "gpushare replay: namespace %s is still terminating after 120 s\n",
                   f.namespace_.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ns = c.Create(kNamespaces, "", ns_body);
  }
  if (!ns.ok() && ns.status().code() != gpushare::StatusCode::kAlreadyExists &&
      !kube::IsConflict(ns.status())) {
    std::fprintf(stderr, "gpushare replay: creating namespace %s: %s\n", f.namespace_.c_str(),
                 ns.status().message().c_str());
    return 1;
  }
  // A namespace this run created goes when it ends, however it ends (one that existed stays).
  struct DropNamespace {
    kube::Client& c;
    std::string name;
    bool created;
    ~DropNamespace() {
      if (created) (void)c.Delete(kNamespaces, "", name);
    }
  } drop{c, f.namespace_, ns.ok()};
  // Pods are admitted once the namespace's default ServiceAccount exists (the controller
  // manager makes it).
  for (int i = 0;; ++i) {
    Result<json> sa = c.Get(kServiceAccounts, f.namespace_, "default");
    if (sa.ok()) break;
    if (i == 120) {
      std::fprintf(stderr,
                   "gpushare replay: namespace %s has no default ServiceAccount after 60 s (is "
                   "kube-controller-manager running?): %s\n",
                   f.namespace_.c_str(), sa.status().message().c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const bool tty = !f.quiet && isatty(STDERR_FILENO);
  const gpushare::placement::TargetWorkload typical = sim::TypicalWorkload(*w, 0.95);
  std::vector<sim::RunResult> runs;
  int64_t overcommits = 0, inconsistent = 0;
  std::string first_problem;
  const auto start_all = std::chrono::steady_clock::now();
  for (uint64_t seed : *seeds) {
    const std::string run = "s" + std::to_string(seed) + "-" + std::to_string(getpid());
    const std::string selector = std::string(kRunLabel) + "=" + run;
    const std::vector<int> order = sim::SubmitOrder(*w, seed, f.tune);
    sim::ReplayTally tally(*w, typical);
    if (!tally.status().ok()) {
      std::fprintf(stderr, "gpushare replay: %s\n", tally.status().message().c_str());
      return 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto api_retry = std::chrono::seconds(static_cast<int64_t>(f.api_retry_s));
    Status failed = Status::Ok();
    {
      Watcher watch(client, f.namespace_, selector);
      for (size_t i = 0; i < order.size() && failed.ok(); ++i) {
        if (g_stop.load()) {
          failed = Status::Aborted("interrupted");
          break;
        }
        sim::ReplayPodSpec spec;
        spec.name = "replay-" + std::to_string(i);
        spec.namespace_ = f.namespace_;
        spec.labels = {{std::string(kRunLabel), run}};
        spec.scheduler_name = f.scheduler_name;
        const sim::TracePod& tp = w->pods[static_cast<size_t>(order[i])];
        const json body = json::parse(sim::ReplayPodJson(tp, spec));
        int tries = 0;
        Result<json> created = Retrying(
            [&] {
              Result<json> r = c.Create(kube::kPods, f.namespace_, body);
              // A retried Create whose first try landed (its reply lost to a restart).
              if (!r.ok() && ++tries > 1 &&
                  r.status().code() == gpushare::StatusCode::kAlreadyExists)
                return Result<json>(json::object());
              return r;
            },
            api_retry);
        if (!created.ok()) {
          failed = created.status().WithContext("creating pod " + spec.name + " (" + tp.name + ")");
          break;
        }
        std::optional<Seen> seen = watch.Wait(
            spec.name, std::chrono::milliseconds(static_cast<int64_t>(f.pod_timeout_s * 1000)));
        if (!seen) {
          if (g_stop.load()) {
            failed = Status::Aborted("interrupted");
          } else {
            failed = Status::DeadlineExceeded(
                "pod " + spec.name + " (" + tp.name + ") neither bound nor unschedulable after " +
                std::to_string(static_cast<int>(f.pod_timeout_s)) + " s" +
                (watch.error().empty() ? "" : " (watch: " + watch.error() + ")"));
          }
          break;
        }
        sim::Observed where;
        std::string problem;
        if (!seen->node.empty()) {
          where.node = seen->node;
          where.gpus = GpusOf(seen->assumed, &problem);
        } else {
          // Refused: the simulator never retries it, so neither does the cluster (a refused
          // pod left behind would be placed later, outside the tally).
          kube::DeleteOptions d;
          d.grace_period_seconds = 0;
          Status gone = Retrying([&] { return c.Delete(kube::kPods, f.namespace_, spec.name, d); },
                                 api_retry);
          if (!gone.ok() && !kube::IsNotFound(gone)) {
            failed = gone.WithContext("deleting the unschedulable pod " + spec.name);
            break;
          }
        }
        Status s = tally.Record(order[i], where);
        if (!problem.empty() || !s.ok()) {
          ++inconsistent;
          if (first_problem.empty()) first_problem = !problem.empty() ? problem : s.message();
        }
        if (tty && (i % 25 == 0 || i + 1 == order.size()))
          Progress(stderr, seed, i + 1, order.size(), tally.refused(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    overcommits += tally.overcommits();
    if (failed.ok() && f.expect_running) {
      int64_t running = 0;
      failed = AwaitRunning(c, f.namespace_, selector, std::chrono::seconds(120), &running);
      if (failed.ok())
        std::fprintf(stdout, "seed %llu: every placed pod Running (%lld)\n",
                     static_cast<unsigned long long>(seed), static_cast<long long>(running));
    }
    Status cleaned = Cleanup(c, f.namespace_, selector);
    if (!failed.ok()) {
      std::fprintf(stderr, "\ngpushare replay: seed %llu: %s\n",
                   static_cast<unsigned long long>(seed), failed.message().c_str());
      if (!cleaned.ok()) std::fprintf(stderr, "gpushare replay: %s\n", cleaned.message().c_str());
      return 1;
    }
    if (!cleaned.ok()) {
      std::fprintf(stderr, "gpushare replay: %s\n", cleaned.message().c_str());
      return 1;
    }
    runs.push_back(tally.Finish(f.policy, seed, seconds));
    std::fprintf(stdout,
                 "seed %llu: %lld pods in %.1f s (%.1f pods/s), %lld placed, %lld unschedulable, "
                 "%lld over-committed\n",
                 static_cast<unsigned long long>(seed),
                 static_cast<long long>(tally.placed() + tally.refused()), seconds,
                 seconds > 0 ? static_cast<double>(tally.placed() + tally.refused()) / seconds : 0,
                 static_cast<long long>(tally.placed()), static_cast<long long>(tally.refused()),
                 static_cast<long long>(tally.overcommits()));
  }
  const auto summary = sim::Summarize(runs);
  for (const auto& [name, content] : std::vector<std::pair<std::string, std::string>>{
           {"curves.csv", sim::CurvesCsv(runs)},
           {"summary.csv", sim::SummaryCsv(summary)},
           {"plot.svg",
            sim::PlotSvg(summary, "Unallocated GPU vs arrived workload (replayed): " + w->name)}}) {
    Status s = sim::MakeDirs(f.out);
    if (s.ok()) s = sim::WriteFile(f.out + "/" + name, content);
    if (!s.ok()) {
      std::fprintf(stderr, "gpushare replay: %s\n", s.message().c_str());
      return 1;
    }
  }
  int gpus = 0;
  for (const auto& n : w->nodes) gpus += static_cast<int>(n.gpu_capacity.size());
  std::fprintf(stdout,
               "workload %s: %zu nodes, %d GPUs, %zu pods; %zu runs (policy %s x %zu seeds), "
               "tune %.2f, %.1f s, replayed through %s\n",
               w->name.c_str(), w->nodes.size(), gpus, w->pods.size(), runs.size(),
               f.policy.c_str(), seeds->size(), f.tune,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count(),
               cfg->server.c_str());
  std::vector<int> pcts;
  for (int p : {90, 95, 100, 110, 130})
    if (p <= static_cast<int>(f.tune * 100 + 0.5) || f.tune <= 0) pcts.push_back(p);
  std::fprintf(stdout, "%s", sim::SummaryTable(summary, pcts).c_str());
  std::fprintf(stdout, "wrote %s/curves.csv, %s/summary.csv, %s/plot.svg\n", f.out.c_str(),
               f.out.c_str(), f.out.c_str());
  if (overcommits > 0 || inconsistent > 0) {
    std::fprintf(stderr,
                 "gpushare replay: the cluster's state is inconsistent: %lld over-committed "
                 "placement(s), %lld pod(s) in all whose annotations disagree (first: %s)\n",
                 static_cast<long long>(overcommits), static_cast<long long>(inconsistent),
                 first_problem.c_str());
    return 1;
  }
  return 0;
}

GPUSHARE_COMMAND(
    "replay",
    "Replay a trace through a cluster's kube-scheduler and gpushare-scheduler and report "
    "unallocated GPU from the cluster's state",
    [](CLI::App& app) -> std::function<int()> {
      auto f = std::make_shared<Flags>();
      app.add_option("--nodes", f->nodes,
                     "Node list CSV (sn,cpu_milli,memory_mib,gpu,model); every node must be in "
                     "the cluster")
          ->required();
      app.add_option("--pods", f->pods,
                     "Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...])")
          ->required();
      app.add_option("--policy", f->policy,
                     "The policy gpushare-scheduler runs (--policy of gpushare-scheduler), for "
                     "the report")
          ->capture_default_str();
      app.add_option("--seeds", f->seeds, "Seeds: N, N-M or a comma list (one run each, in turn)")
          ->capture_default_str();
      app.add_option("--tune", f->tune,
                     "Inflate the workload to this multiple of GPU capacity (0: no inflation)")
          ->check(gpushare::NumberIn(0, sim::kMaxTune, "0: no inflation"))
          ->capture_default_str();
      app.add_option("--out", f->out, "Directory for curves.csv, summary.csv and plot.svg")
          ->capture_default_str();
      app.add_option("--namespace", f->namespace_, "Namespace of the replay's pods (created)")
          ->capture_default_str();
      app.add_option("--scheduler-name", f->scheduler_name,
                     "spec.schedulerName of the pods (default: the cluster's default scheduler)");
      app.add_option("--pod-timeout", f->pod_timeout_s,
                     "Seconds one pod may take to be bound or found unschedulable")
          ->check(gpushare::NumberIn(1, 3600, ""))
          ->capture_default_str();
      app.add_option("--api-retry", f->api_retry_s,
                     "Seconds a pod's creation or deletion is retried while the API server is "
                     "unreachable or overloaded (a restart)")
          ->check(gpushare::NumberIn(0, 3600, ""))
          ->capture_default_str();
      app.add_option("--kubeconfig", f->kubeconfig,
                     "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
      app.add_option("--context", f->context, "kubeconfig context (default: current-context)");
      app.add_flag("--quiet", f->quiet, "No progress line");
      app.add_flag("--expect-running", f->expect_running,
                   "At the end, wait up to 120 s for every placed pod to be Running, else fail "
                   "(for clusters whose pods start at once, such as kwok's)");
      return [f]() { return Replay(*f); };
    });

}  // namespace
