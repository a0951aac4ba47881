// Reports of a simulation: curves.csv, summary.csv, an SVG plot and the text table.
//
//   curves.csv   policy,seed,arrived_pct,unallocated_pct,frag_pct (one row per run and bin)
//   summary.csv  policy,arrived_pct,unallocated_pct_median (median over seeds)
//   plot.svg     unallocated GPU % against arrived workload %, one line per policy, plus the
//                ideal line max(0, 100 - arrived)
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "sim/experiment.h"

namespace gpushare::sim {

std::string CurvesCsv(const std::vector<RunResult>& runs);
std::string SummaryCsv(const std::vector<SummaryPoint>& summary);
std::string PlotSvg(const std::vector<SummaryPoint>& summary, const std::string& title);
// Median unallocated % at the given arrived percents, one row per policy ("-" where absent).
std::string SummaryTable(const std::vector<SummaryPoint>& summary, const std::vector<int>& pcts);

// Appends printf-style text to *out (any length).
void Appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));

Status WriteFile(const std::string& path, const std::string& content);
Status MakeDirs(const std::string& path);

}  // namespace gpushare::sim
