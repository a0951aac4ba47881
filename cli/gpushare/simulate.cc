// `gpushare simulate`: the placement simulator. Flags only; the work is in sim/.
#include "sim/simulate.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/gpushare/command.h"
#include "config/flag_checks.h"
#include "sim/experiment.h"

namespace {

struct Flags {
  gpushare::sim::SimulateOptions o;
  std::string policies = "all";
  std::string seeds = "42-51";
};

GPUSHARE_COMMAND(
    "simulate",
    "Replay a cluster and a workload through the placement engine and report unallocated GPU per "
    "policy",
    [](CLI::App& app) -> std::function<int()> {
      auto f = std::make_shared<Flags>();
      app.add_option("--nodes", f->o.nodes_path,
                     "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
      app.add_option("--pods", f->o.pods_path,
                     "Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...])");
      app.add_option("--policy", f->policies, "Comma-separated policies, or all")
          ->capture_default_str();
      app.add_option("--seeds", f->seeds, "Seeds: N, N-M or a comma list")->capture_default_str();
      app.add_option("--tune", f->o.tune,
                     "Inflate the workload to this multiple of GPU capacity (0: no inflation)")
          ->check(gpushare::NumberIn(0, gpushare::sim::kMaxTune, "0: no inflation"))
          ->capture_default_str();
      app.add_option("--out", f->o.out_dir, "Directory for curves.csv, summary.csv and plot.svg")
          ->capture_default_str();
      app.add_option("--mode", f->o.mode,
                     "static (the reference protocol) or dynamic (creation/deletion times)")
          ->check(CLI::IsMember({"static", "dynamic"}))
          ->capture_default_str();
      app.add_option("--jobs", f->o.jobs, "Parallel runs (0: one per CPU)")
          ->check(gpushare::IntegerIn(0, gpushare::sim::kMaxJobs, "0: one per CPU"))
          ->capture_default_str();
      app.add_flag("--quiet", f->o.quiet, "No progress line");
      return [f]() {
        auto policies = gpushare::sim::ParsePolicies(f->policies);
        if (!policies.ok()) {
          std::fprintf(stderr, "gpushare simulate: %s\n", policies.status().message().c_str());
          return 2;
        }
        auto seeds = gpushare::sim::ParseSeeds(f->seeds);
        if (!seeds.ok()) {
          std::fprintf(stderr, "gpushare simulate: %s\n", seeds.status().message().c_str());
          return 2;
        }
        if (f->o.nodes_path.empty() != f->o.pods_path.empty()) {
          std::fprintf(
              stderr,
              "gpushare simulate: give both --nodes and --pods, or neither (built-in default)\n");
          return 2;
        }
        f->o.policies = *policies;
        f->o.seeds = *seeds;
        f->o.progress_tty = !f->o.quiet && isatty(STDERR_FILENO);
        return gpushare::sim::Simulate(f->o, stdout, stderr);
      };
    });

}  // namespace
