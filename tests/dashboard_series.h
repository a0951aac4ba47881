// dashboard_series.h: the series the Grafana dashboard of the chart queries
// (deploy/helm/gpushare/dashboards/gpushare.json), for the tests that check each daemon exposes
// every one of them (tests/node/metrics_test.cc, tests/scheduler/metrics_test.cc).
#pragma once

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace gpushare::testing {

// The metric names the dashboard's queries use whose name starts with one of `prefixes`; a
// histogram's _bucket, _sum and _count series are named by the histogram.
inline std::set<std::string> DashboardSeries(const std::vector<std::string>& prefixes) {
  std::ifstream in(std::string(GPUSHARE_SOURCE_DIR) +
                   "/deploy/helm/gpushare/dashboards/gpushare.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> names;
  const std::regex name("gpushare_[a-z_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    std::string n = it->str();
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) {
        n.resize(n.size() - s.size());
      }
    }
    for (const std::string& p : prefixes) {
      if (n.rfind(p, 0) == 0) names.insert(n);
    }
  }
  return names;
}

// The names of the families `exposition` (Prometheus text) declares with a # TYPE line.
inline std::set<std::string> TypedFamilies(const std::string& exposition) {
  std::set<std::string> typed;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) typed.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return typed;
}

}  // namespace gpushare::testing
