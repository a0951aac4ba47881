#include "core/problem_list.h"

#include <gtest/gtest.h>

#include <string>

#include "base/strings.h"

namespace gpushare {
namespace {

TEST(EscapeControlBytes, EscapesC0AndDelOnly) {
  EXPECT_EQ(EscapeControlBytes(std::string("mig\0Strategy", 12)), "mig\\0Strategy");
  EXPECT_EQ(EscapeControlBytes("a\tb\nc\rd\x1b[31m\x7f"), "a\\tb\\nc\\rd\\x1b[31m\\x7f");
  EXPECT_EQ(EscapeControlBytes("plain ASCII, UTF-8 \xc3\xa9 and a \\ stay"),
            "plain ASCII, UTF-8 \xc3\xa9 and a \\ stay");
}

TEST(ProblemList, ShowsTheFirstInOrderAndCountsTheRest) {
  ProblemList p(3);
  EXPECT_TRUE(p.empty());
  // Added out of order, many more than shown: the three lowest orders are kept, ties in the
  // order they were added, unordered ones last.
  for (int i = 100; i >= 0; --i) p.Add("line " + std::to_string(i), static_cast<uint64_t>(i));
  p.Add("tie of 1", 1);
  p.Add("no order");
  EXPECT_EQ(p.size(), 103u);
  EXPECT_EQ(p.Shown(), (std::vector<std::string>{"line 0", "line 1", "tie of 1"}));
  EXPECT_EQ(p.Joined(), "line 0\nline 1\ntie of 1\n... and 100 more problems (103 in all)");
}

TEST(ProblemList, UnorderedProblemsKeepTheirOrderAndNoCountWhenAllFit) {
  ProblemList p;
  p.push_back("b");
  p.push_back("a\nsecond line");
  EXPECT_EQ(SplitLines(p.Joined()), (std::vector<std::string>{"b", "a\\nsecond line"}));
}

TEST(ProblemList, MemoryStaysBounded) {
  ProblemList p(20);
  for (int i = 0; i < 1000000; ++i) p.Add(std::string(100, 'x'));
  EXPECT_EQ(p.size(), 1000000u);
  EXPECT_EQ(p.Shown().size(), 20u);
}

TEST(CapLines, CountsWhatIsLeftOut) {
  EXPECT_EQ(CapLines({"a", "b"}, "notes", 2), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(CapLines({"a", "b", "c"}, "notes", 2),
            (std::vector<std::string>{"a", "b", "... and 1 more note (3 in all)"}));
}

}  // namespace
}  // namespace gpushare
