#include "sim/experiment.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>
#include <unordered_set>

#include "base/sync.h"
#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "core/problem_list.h"

namespace gpushare::sim {

using placement::ClusterState;
using placement::Rng;

std::vector<int> ShuffledOrder(const std::vector<TracePod>& pods, Rng& rng) {
  std::vector<int> order(pods.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return pods[a].name < pods[b].name; });
  rng.Shuffle(order);
  return order;
}

std::vector<int> TuneOrder(std::vector<int> order, const std::vector<TracePod>& pods,
                           int64_t capacity, double tune, Rng& rng) {
  if (tune <= 0 || pods.empty()) return order;
  const double target = tune * static_cast<double>(capacity);
  int64_t total = 0;
  for (int i : order) total += pods[i].gpu_demand();
  if (static_cast<double>(total) < target) {
    bool any_gpu = false;
    for (const auto& p : pods) any_gpu = any_gpu || p.gpu_demand() > 0;
    if (!any_gpu) return order;  // nothing could ever reach the target
    std::vector<int> by_name(pods.size());
    std::iota(by_name.begin(), by_name.end(), 0);
    std::stable_sort(by_name.begin(), by_name.end(),
                     [&](int a, int b) { return pods[a].name < pods[b].name; });
    while (true) {
      const int idx = by_name[rng.Uniform(by_name.size())];
      // The reference's quirk: the stop test adds the per-GPU share, the total adds them all.
      if (static_cast<double>(total + pods[idx].gpu_milli) > target) break;
      total += pods[idx].gpu_demand();
      order.push_back(idx);
    }
  } else {
    while (static_cast<double>(total) > target && !order.empty()) {
      const size_t idx = rng.Uniform(order.size());
      total -= pods[order[idx]].gpu_demand();
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(idx));
    }
  }
  return order;
}

std::vector<int64_t> TieRanks(const std::vector<placement::NodeSpec>& nodes, Rng& rng) {
  std::vector<int> by_name(nodes.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](int a, int b) { return nodes[a].name < nodes[b].name; });
  const std::vector<int> perm = rng.Permutation(static_cast<int>(nodes.size()));
  std::vector<int64_t> rank(nodes.size());
  for (size_t i = 0; i < by_name.size(); ++i) rank[by_name[i]] = perm[i];
  return rank;
}

namespace {

double Round2(double x) {
  return std::nearbyint(x * 100.0) / 100.0;
}

}  // namespace

std::vector<CurvePoint> BinSamples(const std::vector<Sample>& samples, int64_t capacity,
                                   int max_pct) {
  std::map<int64_t, std::pair<std::vector<double>, std::vector<double>>> bins;
  const double cap = static_cast<double>(capacity > 0 ? capacity : 1);
  for (const auto& s : samples) {
    // std::nearbyint rounds half to even under the default rounding mode, like Python's round().
    const auto a =
        static_cast<int64_t>(std::nearbyint(100.0 * static_cast<double>(s.arrived) / cap));
    auto& b = bins[a];
    b.first.push_back(Round2(100.0 * static_cast<double>(s.used) / cap));
    b.second.push_back(Round2(100.0 * s.frag / cap));
  }
  std::vector<CurvePoint> out;
  for (int pct = 0; pct <= max_pct; ++pct) {
    CurvePoint p;
    p.arrived_pct = pct;
    double alloc = 0, frag = 0;
    size_t n = 0;
    auto add = [&](int64_t key) {
      auto it = bins.find(key);
      if (it == bins.end()) return;
      for (double v : it->second.first) alloc += v;
      for (double v : it->second.second) frag += v;
      n += it->second.first.size();
    };
    add(pct);
    if (n == 0) {
      add(pct - 1);
      add(pct + 1);
    }
    if (n > 0) {
      p.present = true;
      p.allocated_pct = Round2(alloc / static_cast<double>(n));
      p.unallocated_pct = 100.0 - p.allocated_pct;
      p.frag_pct = Round2(frag / static_cast<double>(n));
    }
    out.push_back(p);
  }
  return out;
}

Status AddNodes(const Workload& workload, ClusterState* cluster) {
  for (const auto& n : workload.nodes) GPUSHARE_RETURN_IF_ERROR(cluster->AddNode(n).status());
  return Status::Ok();
}

void ParallelFor(size_t count, int jobs, const std::function<void(size_t)>& work,
                 const std::function<void(int, int)>& progress) {
  int threads = jobs > 0 ? jobs : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(count)));
  std::atomic<size_t> next{0};
  Mutex mu;
  int finished = 0;  // under mu
  auto worker = [&]() {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      work(i);
      MutexLock lock(&mu);
      ++finished;
      if (progress) progress(finished, static_cast<int>(count));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

placement::TargetWorkload TypicalWorkload(const Workload& workload, double popularity) {
  ClusterState cluster;
  (void)AddNodes(workload, &cluster);  // an invalid node list fails later, in the run
  std::vector<placement::PodRequest> requests;
  requests.reserve(workload.pods.size());
  for (const auto& p : workload.pods) requests.push_back(p.request);
  placement::WorkloadOptions o;
  o.popularity = popularity;
  return placement::BuildTargetWorkload(requests, cluster, o);
}

RunResult RunOne(const Workload& workload, const placement::TargetWorkload& typical,
                 const std::string& policy_name, uint64_t seed, double tune) {
  return RunOneWith(
      workload, typical, policy_name,
      [&](const ClusterState& c, const placement::TargetWorkload& t,
          const placement::PolicyOptions& o,
          Rng* rng) { return placement::MakePolicy(policy_name, c, t, o, rng); },
      seed, tune);
}

RunResult RunOneWith(const Workload& workload, const placement::TargetWorkload& typical,
                     const std::string& policy_name, const PolicyFactory& factory, uint64_t seed,
                     double tune) {
  const auto start = std::chrono::steady_clock::now();
  RunResult r;
  ClusterState cluster;
  if (!BeginRun(workload, policy_name, seed, &r, &cluster)) return r;
  const int64_t capacity = cluster.gpu_capacity_total();
  r.capacity = capacity;
  Rng rng(seed);
  std::vector<int> order = ShuffledOrder(workload.pods, rng);
  order = TuneOrder(std::move(order), workload.pods, capacity, tune, rng);
  const std::vector<int64_t> ranks = TieRanks(workload.nodes, rng);
  for (int i = 0; i < cluster.num_nodes(); ++i) cluster.set_tie_rank(i, ranks[i]);

  placement::PolicyOptions po;
  po.gpu_unit = workload.gpu_unit;
  auto policy = factory(cluster, typical, po, &rng);
  if (!policy.ok()) {
    r.status = policy.status();
    return r;
  }
  placement::PlacementEngine engine(cluster, **policy);
  std::vector<placement::ShapeId> shape_of(workload.pods.size(), -1);
  std::vector<double> node_frag(cluster.num_nodes());
  double frag_total = 0;
  for (int n = 0; n < cluster.num_nodes(); ++n) {
    node_frag[n] = placement::NodeFragmentation(cluster.node(n), typical);
    frag_total += node_frag[n];
  }
  std::vector<Sample> samples;
  samples.reserve(order.size() + 1);
  int64_t arrived = 0;
  for (int idx : order) {
    const TracePod& pod = workload.pods[idx];
    if (shape_of[idx] < 0) {
      auto id = engine.Intern(pod.request);
      if (!id.ok()) {
        r.status = id.status().WithContext("pod " + pod.name);
        return r;
      }
      shape_of[idx] = *id;
    }
    ++r.pods_submitted;
    const placement::Decision d = engine.Choose(shape_of[idx]);
    bool placed = false;
    const int64_t free_before = cluster.gpu_free_total();
    if (d.placed()) {
      auto id = engine.Commit(shape_of[idx], d);
      placed = id.ok();
    }
    // A placed pod arrives with what it was given (whole GPUs of different sizes differ); a
    // failed one with its nominal demand. For the trace both are num_gpu x gpu_milli.
    arrived += placed ? free_before - cluster.gpu_free_total() : pod.gpu_demand();
    if (placed) {
      frag_total -= node_frag[d.node];
      node_frag[d.node] = placement::NodeFragmentation(cluster.node(d.node), typical);
      frag_total += node_frag[d.node];
    } else {
      ++r.pods_failed;
      r.failed_gpu_demand += pod.gpu_demand();
    }
    Sample s;
    s.arrived = arrived;
    s.used = capacity - cluster.gpu_free_total();
    s.frag = frag_total;
    samples.push_back(s);
  }
  int max_pct = 0;
  if (!samples.empty())
    max_pct = static_cast<int>(std::nearbyint(100.0 * static_cast<double>(samples.back().arrived) /
                                              static_cast<double>(capacity > 0 ? capacity : 1)));
  r.curve = BinSamples(samples, capacity, max_pct);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<RunResult> RunExperiment(const Workload& workload, const ExperimentOptions& options) {
  const placement::TargetWorkload typical = TypicalWorkload(workload, options.popularity);
  struct Job {
    std::string policy;
    uint64_t seed;
  };
  std::vector<Job> jobs;
  for (const auto& p : options.policies)
    for (uint64_t s : options.seeds) jobs.push_back({p, s});
  std::vector<RunResult> results(jobs.size());
  ParallelFor(
      jobs.size(), options.jobs,
      [&](size_t i) {
        results[i] = RunOne(workload, typical, jobs[i].policy, jobs[i].seed, options.tune);
      },
      options.progress);
  return results;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::vector<SummaryPoint> Summarize(const std::vector<RunResult>& runs) {
  std::vector<std::string> policies;
  for (const auto& r : runs)
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end())
      policies.push_back(r.policy);
  std::vector<SummaryPoint> out;
  for (const auto& p : policies) {
    size_t max_len = 0;
    for (const auto& r : runs)
      if (r.policy == p) max_len = std::max(max_len, r.curve.size());
    for (size_t pct = 0; pct < max_len; ++pct) {
      std::vector<double> un, fr;
      for (const auto& r : runs) {
        if (r.policy != p || pct >= r.curve.size() || !r.curve[pct].present) continue;
        un.push_back(r.curve[pct].unallocated_pct);
        fr.push_back(r.curve[pct].frag_pct);
      }
      if (un.empty()) continue;
      SummaryPoint s;
      s.policy = p;
      s.arrived_pct = static_cast<int>(pct);
      s.unallocated_median = Median(un);
      s.frag_median = Median(fr);
      s.runs = static_cast<int>(un.size());
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace gpushare::sim

namespace gpushare::sim {

Result<std::vector<uint64_t>> ParseSeeds(std::string_view text) {
  auto parse = [](std::string_view s, uint64_t* v) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t x = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      x = x * 10 + static_cast<uint64_t>(c - '0');
    }
    *v = x;
    return true;
  };
  // The ranges first, counted before any is expanded.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t asked = 0;  // saturates: at most 19-digit bounds, so one range never overflows
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    uint64_t a = 0, b = 0;
    bool ok = dash == std::string_view::npos
                  ? parse(item, &a) && parse(item, &b)
                  : parse(item.substr(0, dash), &a) && parse(item.substr(dash + 1), &b);
    if (!ok || b < a)
      return Status::InvalidArgument("--seeds: bad item '" + EscapeControlBytes(item) +
                                     "' (expected N, N-M or a comma list)");
    asked = b - a + 1 > UINT64_MAX - asked ? UINT64_MAX : asked + (b - a + 1);
    ranges.emplace_back(a, b);
    start = comma + 1;
  }
  if (asked > kMaxSeeds) {
    return Status::InvalidArgument("--seeds: at most " + std::to_string(kMaxSeeds) +
                                   " seeds, got " + std::to_string(asked));
  }
  std::vector<uint64_t> out;
  std::unordered_set<uint64_t> seen;
  for (const auto& [a, b] : ranges)
    for (uint64_t s = a; s <= b; ++s)
      if (seen.insert(s).second) out.push_back(s);
  return out;
}

Result<std::vector<std::string>> ParsePolicies(std::string_view text) {
  const auto& known = placement::PolicyNames();
  if (text == "all") return known;
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item(text.substr(start, comma - start));
    if (!placement::IsPolicyName(item))
      return Status::InvalidArgument("--policy: unknown policy '" + EscapeControlBytes(item) +
                                     "' (known: " + placement::JoinedPolicyNames(",") +
                                     ", or all)");
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

}  // namespace gpushare::sim
