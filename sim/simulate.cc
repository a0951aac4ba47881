#include "sim/simulate.h"

#include <chrono>

#include "sim/dynamic.h"
#include "sim/experiment.h"
#include "sim/generator.h"
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

Status WriteAll(const std::string& dir,
                const std::vector<std::pair<std::string, std::string>>& files) {
  GPUSHARE_RETURN_IF_ERROR(MakeDirs(dir));
  for (const auto& [name, content] : files)
    GPUSHARE_RETURN_IF_ERROR(WriteFile(dir + "/" + name, content));
  return Status::Ok();
}

int RunDynamicMode(const Workload& w, const SimulateOptions& o, std::FILE* out, std::FILE* err) {
  const auto start = std::chrono::steady_clock::now();
  std::function<void(int, int)> progress;
  if (o.progress_tty) {
    progress = [&](int done, int total) {
      Progress(err, done, total,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  }
  const auto runs = RunDynamicExperiment(w, o.policies, o.seeds, o.jobs, progress);
  for (const auto& r : runs) {
    if (!r.status.ok()) {
      std::fprintf(err, "gpushare simulate: policy %s seed %llu: %s\n", r.policy.c_str(),
                   static_cast<unsigned long long>(r.seed), r.status.message().c_str());
      return 1;
    }
  }
  if (Status s = WriteAll(o.out_dir, {{"dynamic.csv", DynamicCsv(runs)},
                                      {"dynamic_summary.csv", DynamicSummaryCsv(runs)}});
      !s.ok()) {
    std::fprintf(err, "gpushare simulate: %s\n", s.message().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
      out,
      "workload %s: %zu nodes, %zu pods replayed by creation/deletion time; %zu runs, %.1f s\n",
      w.name.c_str(), w.nodes.size(), w.pods.size(), runs.size(), seconds);
  std::fprintf(out, "%s", DynamicTable(runs).c_str());
  std::fprintf(out, "wrote %s/dynamic.csv, %s/dynamic_summary.csv\n", o.out_dir.c_str(),
               o.out_dir.c_str());
  return 0;
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
      Progress(err, done, total,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto summary = Summarize(runs);
  if (Status s = WriteAll(
          o.out_dir,
          {{"curves.csv", CurvesCsv(runs)},
           {"summary.csv", SummaryCsv(summary)},
           {"plot.svg", PlotSvg(summary, "Unallocated GPU vs arrived workload: " + w.name)}});
      !s.ok()) {
    std::fprintf(err, "gpushare simulate: %s\n", s.message().c_str());
    return 1;
  }
  int gpus = 0;
  for (const auto& n : w.nodes) gpus += static_cast<int>(n.gpu_capacity.size());
  std::fprintf(out,
               "workload %s: %zu nodes, %d GPUs, %zu pods; %zu runs (%zu policies x %zu seeds), "
               "tune %.2f, %.1f s\n",
               w.name.c_str(), w.nodes.size(), gpus, w.pods.size(), runs.size(), o.policies.size(),
               o.seeds.size(), o.tune, seconds);
  std::vector<int> pcts;
  for (int p : {90, 95, 100, 110, 130})
    if (p <= static_cast<int>(o.tune * 100 + 0.5) || o.tune <= 0) pcts.push_back(p);
  std::fprintf(out, "%s", SummaryTable(summary, pcts).c_str());
  std::fprintf(out, "wrote %s/curves.csv, %s/summary.csv, %s/plot.svg\n", o.out_dir.c_str(),
               o.out_dir.c_str(), o.out_dir.c_str());
  return 0;
}

}  // namespace

int Simulate(const SimulateOptions& o, std::FILE* out, std::FILE* err) {
  if (o.policies.empty() || o.seeds.empty()) {
    std::fprintf(err, "gpushare simulate: need at least one policy and one seed\n");
    return 2;
  }
  if (o.mode != "static" && o.mode != "dynamic") {
    std::fprintf(err, "gpushare simulate: --mode must be static or dynamic\n");
    return 2;
  }
  const bool builtin = o.nodes_path.empty() && o.pods_path.empty();
  Workload w;
  if (builtin) {
    w = GenerateDefaultWorkload();
  } else {
    auto loaded = LoadWorkload(o.nodes_path, o.pods_path);
    if (!loaded.ok()) {
      std::fprintf(err, "gpushare simulate: %s\n", loaded.status().message().c_str());
      return 1;
    }
    w = std::move(loaded).value();
  }
  const int rc = o.mode == "dynamic" ? RunDynamicMode(w, o, out, err) : RunStatic(w, o, out, err);
  if (rc != 0 || !builtin) return rc;
  auto c = CompareSharing(w, "default", o.seeds.front());
  if (!c.ok()) {
    std::fprintf(err, "gpushare simulate: %s\n", c.status().message().c_str());
    return 1;
  }
  std::fprintf(out, "%s", SharingReport(*c, "default").c_str());
  return 0;
}

}  // namespace gpushare::sim
