#include "sim/simulate.h"

#include <chrono>

#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace gpushare::sim {
namespace {

void Progress(std::FILE* err, int done, int total, double seconds) {
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  std::string bar(static_cast<size_t>(filled), '=');
  bar.resize(width, ' ');
  std::fprintf(err, "\r[%s] %d/%d runs, %.1f s", bar.c_str(), done, total, seconds);
  if (done == total) std::fprintf(err, "\n");
  std::fflush(err);
}

int RunStatic(const Workload& w, const SimulateOptions& o, std::FILE* out, std::FILE* err) {
  ExperimentOptions eo;
  eo.policies = o.policies;
  eo.seeds = o.seeds;
  eo.tune = o.tune;
  eo.jobs = o.jobs;
  const auto start = std::chrono::steady_clock::now();
  if (o.progress_tty) {
    eo.progress = [&](int done, int total) {
      Progress(err, done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  }
  const std::vector<RunResult> runs = RunExperiment(w, eo);
  for (const auto& r : runs) {
    if (!r.status.ok()) {
      std::fprintf(err, "gpushare simulate: policy %s seed %llu: %s\n", r.policy.c_str(),
                   static_cast<unsigned long long>(r.seed), r.status.message().c_str());
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto summary = Summarize(runs);
  if (Status s = MakeDirs(o.out_dir); !s.ok()) {
    std::fprintf(err, "gpushare simulate: %s\n", s.message().c_str());
    return 1;
  }
  for (const auto& [name, content] :
       {std::pair<std::string, std::string>{"curves.csv", CurvesCsv(runs)},
        {"summary.csv", SummaryCsv(summary)},
        {"plot.svg", PlotSvg(summary, "Unallocated GPU vs arrived workload: " + w.name)}}) {
    if (Status s = WriteFile(o.out_dir + "/" + name, content); !s.ok()) {
      std::fprintf(err, "gpushare simulate: %s\n", s.message().c_str());
      return 1;
    }
  }
  int gpus = 0;
  for (const auto& n : w.nodes) gpus += static_cast<int>(n.gpu_capacity.size());
  std::fprintf(out, "workload %s: %zu nodes, %d GPUs, %zu pods; %zu runs (%zu policies x %zu seeds), tune %.2f, %.1f s\n",
               w.name.c_str(), w.nodes.size(), gpus, w.pods.size(), runs.size(), o.policies.size(), o.seeds.size(),
               o.tune, seconds);
  std::vector<int> pcts;
  for (int p : {90, 95, 100, 110, 130})
    if (p <= static_cast<int>(o.tune * 100 + 0.5) || o.tune <= 0) pcts.push_back(p);
  std::fprintf(out, "%s", SummaryTable(summary, pcts).c_str());
  std::fprintf(out, "wrote %s/curves.csv, %s/summary.csv, %s/plot.svg\n", o.out_dir.c_str(), o.out_dir.c_str(),
               o.out_dir.c_str());
  return 0;
}

}  // namespace

int Simulate(const SimulateOptions& o, std::FILE* out, std::FILE* err) {
  if (o.policies.empty() || o.seeds.empty()) {
    std::fprintf(err, "gpushare simulate: need at least one policy and one seed\n");
    return 2;
  }
  if (o.nodes_path.empty()) {
    std::fprintf(err, "gpushare simulate: the built-in default is not available yet\n");
    return 2;
  }
  auto w = LoadWorkload(o.nodes_path, o.pods_path);
  if (!w.ok()) {
    std::fprintf(err, "gpushare simulate: %s\n", w.status().message().c_str());
    return 1;
  }
  if (o.mode == "dynamic") {
    std::fprintf(err, "gpushare simulate: --mode dynamic is not available yet\n");
    return 2;
  }
  return RunStatic(*w, o, out, err);
}

}  // namespace gpushare::sim
