#include "sim/report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace gpushare::sim {
namespace {

std::vector<RunResult> TwoRuns() {
  std::vector<RunResult> runs(2);
  runs[0].policy = "fgd";
  runs[0].seed = 42;
  runs[1].policy = "default";
  runs[1].seed = 42;
  for (auto& r : runs) {
    for (int pct = 0; pct <= 2; ++pct) {
      CurvePoint p;
      p.arrived_pct = pct;
      p.present = pct != 1;
      p.allocated_pct = pct;
      p.unallocated_pct = 100 - pct;
      p.frag_pct = 0.5;
      r.curve.push_back(p);
    }
  }
  return runs;
}

TEST(ReportTest, CurvesAndSummaryCsv) {
  const auto runs = TwoRuns();
  EXPECT_EQ(CurvesCsv(runs),
            "policy,seed,arrived_pct,unallocated_pct,frag_pct\n"
            "fgd,42,0,100.00,0.50\nfgd,42,2,98.00,0.50\n"
            "default,42,0,100.00,0.50\ndefault,42,2,98.00,0.50\n");
  const auto summary = Summarize(runs);
  ASSERT_EQ(summary.size(), 4u);
  EXPECT_EQ(
      SummaryCsv(summary).substr(0, 60),
      std::string("policy,arrived_pct,unallocated_pct_median\nfgd,0,100.000\nfgd,2").substr(0, 60));
}

TEST(ReportTest, PlotAndTable) {
  const auto summary = Summarize(TwoRuns());
  const std::string svg = PlotSvg(summary, "a <title> & more");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  size_t lines = 0;
  for (size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 3u);  // two policies and the ideal line
  const std::string table = SummaryTable(summary, {0, 2, 90});
  EXPECT_NE(table.find("fgd"), std::string::npos);
  EXPECT_NE(table.find("98.00"), std::string::npos);
  EXPECT_NE(table.find("-"), std::string::npos);  // 90% is absent
}

TEST(ReportTest, WritesFilesAndDirectories) {
  const std::string dir = ::testing::TempDir() + "/report_test/a/b";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFile(dir + "/x.txt", "hello").ok());
  std::ifstream in(dir + "/x.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "hello");
  EXPECT_FALSE(MakeDirs(dir + "/x.txt/c").ok());  // a file in the way
  EXPECT_FALSE(WriteFile("/nonexistent-dir/x", "y").ok());
}

}  // namespace
}  // namespace gpushare::sim
