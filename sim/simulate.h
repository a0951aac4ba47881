// Simulate: what `gpushare simulate` does, as a library call (the CLI only parses flags).
//
// Loads --nodes/--pods (or generates the built-in default, see generator.h), runs the static
// reference protocol or the dynamic replay for every policy x seed in parallel, writes the
// reports into out_dir and prints the table. Returns the process exit status: 0, 1 when the
// simulation failed (bad input, unwritable output), 2 for bad options.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpushare::sim {

struct SimulateOptions {
  std::string nodes_path;  // empty (with pods_path empty): the built-in default
  std::string pods_path;
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  double tune = 1.3;
  std::string out_dir = "simulate-out";
  std::string mode = "static";  // or "dynamic"
  int jobs = 0;
  bool quiet = false;
  bool progress_tty = false;  // draw a progress line on err (a terminal)
};

int Simulate(const SimulateOptions& options, std::FILE* out, std::FILE* err);

}  // namespace gpushare::sim
