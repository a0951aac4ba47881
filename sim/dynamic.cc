#include "sim/dynamic.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <list>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "sim/experiment.h"
#include "sim/report.h"

namespace gpushare::sim {

using placement::ClusterState;
using placement::PlacementEngine;
using placement::Rng;

DynamicResult RunDynamic(const Workload& workload, const placement::TargetWorkload& typical,
                         const std::string& policy_name, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  DynamicResult r;
  ClusterState cluster;
  if (!BeginRun(workload, policy_name, seed, &r, &cluster)) return r;
  const double capacity = static_cast<double>(std::max<int64_t>(1, cluster.gpu_capacity_total()));
  Rng rng(seed);
  const std::vector<int64_t> ranks = TieRanks(workload.nodes, rng);
  for (int i = 0; i < cluster.num_nodes(); ++i) cluster.set_tie_rank(i, ranks[i]);
  placement::PolicyOptions po;
  po.gpu_unit = workload.gpu_unit;
  auto policy = placement::MakePolicy(policy_name, cluster, typical, po, &rng);
  if (!policy.ok()) {
    r.status = policy.status();
    return r;
  }
  PlacementEngine engine(cluster, **policy);

  // Events: (time, kind 0 = departure / 1 = arrival, pod).
  struct Event {
    int64_t time;
    int kind;
    int pod;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < workload.pods.size(); ++i) {
    const TracePod& p = workload.pods[i];
    if (!p.creation_time) {
      r.status = Status::InvalidArgument("pod " + p.name + " (line " + std::to_string(p.line) +
                                         "): the dynamic mode needs creation_time");
      return r;
    }
    if (p.deletion_time && *p.deletion_time <= *p.creation_time) {
      ++r.skipped;
      continue;
    }
    events.push_back({*p.creation_time, 1, static_cast<int>(i)});
    if (p.deletion_time) events.push_back({*p.deletion_time, 0, static_cast<int>(i)});
    ++r.pods;
  }
  std::sort(events.begin(), events.end(), [&](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    return workload.pods[a.pod].name < workload.pods[b.pod].name;
  });
  if (events.empty()) return r;

  enum class State : uint8_t { kPending, kRunning, kWaiting, kGone };
  std::vector<State> state(workload.pods.size(), State::kPending);
  std::vector<placement::PlacementId> placement(workload.pods.size(), -1);
  std::vector<int64_t> wait_since(workload.pods.size(), 0);
  std::vector<placement::ShapeId> shape(workload.pods.size(), -1);
  std::list<int> queue;
  std::vector<std::list<int>::iterator> queue_pos(workload.pods.size());
  int64_t waiting = 0;
  double live_demand = 0;
  double wait_total = 0;

  const int64_t t0 = events.front().time;
  const int64_t t1 = events.back().time;
  const int64_t span = std::max<int64_t>(1, t1 - t0);
  const int kSamples = 500;
  int next_sample = 0;
  double used_integral = 0, demand_integral = 0;
  int64_t last_time = t0;

  auto shape_of = [&](int i) -> Result<placement::ShapeId> {
    if (shape[i] < 0) {
      GPUSHARE_ASSIGN_OR_RETURN(auto id, engine.Intern(workload.pods[i].request));
      shape[i] = id;
    }
    return shape[i];
  };
  auto place = [&](int i, const placement::Decision& d) {
    auto id = engine.Commit(shape[i], d);
    if (!id.ok()) return false;
    placement[i] = *id;
    state[i] = State::kRunning;
    return true;
  };

  for (const Event& e : events) {
    if (e.time > last_time) {
      const double used = capacity - static_cast<double>(cluster.gpu_free_total());
      used_integral += used * static_cast<double>(e.time - last_time);
      demand_integral += live_demand * static_cast<double>(e.time - last_time);
      while (next_sample < kSamples && t0 + span * next_sample / kSamples < e.time) {
        r.samples.push_back({t0 + span * next_sample / kSamples, 100.0 * used / capacity, waiting});
        ++next_sample;
      }
      last_time = e.time;
    }
    const int i = e.pod;
    const TracePod& p = workload.pods[i];
    if (e.kind == 1) {  // arrival
      auto sid = shape_of(i);
      if (!sid.ok()) {
        r.status = sid.status().WithContext("pod " + p.name);
        return r;
      }
      live_demand += static_cast<double>(p.gpu_demand());
      const placement::Decision d = engine.Choose(*sid);
      if (d.placed() && place(i, d)) {
        ++r.placed_on_arrival;
      } else {
        state[i] = State::kWaiting;
        wait_since[i] = e.time;
        queue_pos[i] = queue.insert(queue.end(), i);
        ++waiting;
        r.max_waiting = std::max(r.max_waiting, waiting);
      }
      continue;
    }
    // departure
    live_demand -= static_cast<double>(p.gpu_demand());
    if (state[i] == State::kWaiting) {
      queue.erase(queue_pos[i]);
      --waiting;
      ++r.failed;
      state[i] = State::kGone;
      continue;
    }
    if (state[i] != State::kRunning) continue;
    const placement::NodeId node = cluster.PlacementNode(placement[i]);
    (void)engine.Release(placement[i]);
    state[i] = State::kGone;
    const std::vector<placement::NodeId> only{node};
    for (auto it = queue.begin(); it != queue.end();) {
      const int w = *it;
      if (placement::CheckFit(cluster.node(node), engine.shape(shape[w])) !=
          placement::Rejection::kNone) {
        ++it;
        continue;
      }
      const placement::Decision d = engine.Choose(shape[w], only);
      if (d.placed() && place(w, d)) {
        ++r.waited;
        const double waited_s = static_cast<double>(e.time - wait_since[w]);
        wait_total += waited_s;
        r.max_wait_s = std::max(r.max_wait_s, waited_s);
        it = queue.erase(it);
        --waiting;
      } else {
        ++it;
      }
    }
    const double used = capacity - static_cast<double>(cluster.gpu_free_total());
    r.peak_alloc_pct = std::max(r.peak_alloc_pct, 100.0 * used / capacity);
  }
  r.failed += waiting;  // never ran before the end of the replay
  r.time_weighted_alloc_pct = 100.0 * used_integral / (capacity * static_cast<double>(span));
  r.time_weighted_demand_pct = 100.0 * demand_integral / (capacity * static_cast<double>(span));
  r.mean_wait_s = r.waited > 0 ? wait_total / static_cast<double>(r.waited) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<DynamicResult> RunDynamicExperiment(const Workload& workload,
                                                const std::vector<std::string>& policies,
                                                const std::vector<uint64_t>& seeds, int jobs,
                                                const std::function<void(int, int)>& progress) {
  const placement::TargetWorkload typical = TypicalWorkload(workload, 0.95);
  std::vector<std::pair<std::string, uint64_t>> work;
  for (const auto& p : policies)
    for (uint64_t s : seeds) work.emplace_back(p, s);
  std::vector<DynamicResult> results(work.size());
  ParallelFor(
      work.size(), jobs,
      [&](size_t i) { results[i] = RunDynamic(workload, typical, work[i].first, work[i].second); },
      progress);
  return results;
}

std::string DynamicCsv(const std::vector<DynamicResult>& runs) {
  std::string out = "policy,seed,time_s,allocated_pct,waiting_pods\n";
  for (const auto& r : runs)
    for (const auto& s : r.samples)
      Appendf(&out, "%s,%llu,%lld,%.3f,%lld\n", r.policy.c_str(),
              static_cast<unsigned long long>(r.seed), static_cast<long long>(s.time),
              s.allocated_pct, static_cast<long long>(s.waiting));
  return out;
}

std::string DynamicSummaryCsv(const std::vector<DynamicResult>& runs) {
  std::string out =
      "policy,seed,time_weighted_alloc_pct,time_weighted_demand_pct,peak_alloc_pct,pods,placed_on_"
      "arrival,waited,"
      "failed,skipped,mean_wait_s,max_wait_s,max_waiting\n";
  for (const auto& r : runs)
    Appendf(&out, "%s,%llu,%.3f,%.3f,%.3f,%lld,%lld,%lld,%lld,%lld,%.1f,%.1f,%lld\n",
            r.policy.c_str(), static_cast<unsigned long long>(r.seed), r.time_weighted_alloc_pct,
            r.time_weighted_demand_pct, r.peak_alloc_pct, static_cast<long long>(r.pods),
            static_cast<long long>(r.placed_on_arrival), static_cast<long long>(r.waited),
            static_cast<long long>(r.failed), static_cast<long long>(r.skipped), r.mean_wait_s,
            r.max_wait_s, static_cast<long long>(r.max_waiting));
  return out;
}

std::string DynamicTable(const std::vector<DynamicResult>& runs) {
  std::vector<std::string> policies;
  for (const auto& r : runs)
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end())
      policies.push_back(r.policy);
  std::string out =
      "dynamic replay (median over seeds)\npolicy      alloc%(time-avg)  demand%(time-avg)  peak "
      "alloc%   waited   failed  "
      "mean wait s\n";
  for (const auto& p : policies) {
    std::vector<double> a, d, pk, w, f, mw;
    for (const auto& r : runs) {
      if (r.policy != p) continue;
      a.push_back(r.time_weighted_alloc_pct);
      d.push_back(r.time_weighted_demand_pct);
      pk.push_back(r.peak_alloc_pct);
      w.push_back(static_cast<double>(r.waited));
      f.push_back(static_cast<double>(r.failed));
      mw.push_back(r.mean_wait_s);
    }
    Appendf(&out, "%-12s %16.2f %18.2f %12.2f %8.0f %8.0f %12.0f\n", p.c_str(), Median(a),
            Median(d), Median(pk), Median(w), Median(f), Median(mw));
  }
  return out;
}

}  // namespace gpushare::sim
