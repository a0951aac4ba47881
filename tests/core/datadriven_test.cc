// The data-driven test runner itself (tests/datadriven.h): the file format, rewriting, the diff.
#include "tests/datadriven.h"

#include <gtest/gtest.h>

namespace gpushare::datadriven {
namespace {

const char* const kFile = R"(# a comment
cmd a=1 b="x y" c
in 1
in 2
----
out 1

# empty input and output
cmd
----

blank
----
----
one

two
----
----
last
----
x
)";

TEST(DataDriven, ParsesCommandsArgumentsInputsAndBothOutputForms) {
  std::string error;
  auto cases = ParseCases("f.txt", kFile, &error);
  ASSERT_TRUE(cases.has_value()) << error;
  ASSERT_EQ(cases->size(), 4u);
  const Case& c = (*cases)[0];
  EXPECT_EQ(c.line, 2);
  EXPECT_EQ(c.command, "cmd");
  EXPECT_EQ(c.Value("a"), "1");
  EXPECT_EQ(c.Value("b"), "x y");
  EXPECT_TRUE(c.Has("c"));
  EXPECT_FALSE(c.Has("d"));
  EXPECT_EQ(c.input, "in 1\nin 2\n");
  EXPECT_EQ(c.expected, "out 1\n");
  EXPECT_EQ(c.Where(), "f.txt:2: cmd a=1 b=x y c");
  EXPECT_EQ((*cases)[1].input, "");
  EXPECT_EQ((*cases)[1].expected, "");
  EXPECT_EQ((*cases)[2].command, "blank");
  EXPECT_EQ((*cases)[2].expected, "one\n\ntwo\n");
  EXPECT_EQ((*cases)[3].expected, "x\n");
}

TEST(DataDriven, RewriteKeepsEverythingButTheOutputs) {
  std::string error;
  auto cases = ParseCases("f.txt", kFile, &error);
  ASSERT_TRUE(cases.has_value()) << error;
  std::vector<std::string> same;
  for (const Case& c : *cases) same.push_back(c.expected);
  EXPECT_EQ(Rewrite(kFile, *cases, same), kFile);
  // New outputs: a blank line switches to the enclosed form and back; an output that was empty
  // keeps a blank line before the next case.
  std::string text = Rewrite(kFile, *cases, {"a\n\nb", "now\n", "flat", "y"});
  auto again = ParseCases("f.txt", text, &error);
  ASSERT_TRUE(again.has_value()) << error << "\n" << text;
  ASSERT_EQ(again->size(), 4u) << text;
  EXPECT_EQ((*again)[0].expected, "a\n\nb\n");
  EXPECT_EQ((*again)[1].expected, "now\n");
  EXPECT_EQ((*again)[2].expected, "flat\n");
  EXPECT_EQ((*again)[3].expected, "y\n");
  EXPECT_NE(text.find("# empty input and output\ncmd\n----\nnow\n\nblank\n"), std::string::npos)
      << text;
}

TEST(DataDriven, ACaseWithoutABlankLineAfterItsOutputIsAnError) {
  std::string error;
  EXPECT_FALSE(ParseCases("f.txt", "a\n----\nout\nb\n----\n", &error).has_value());
  EXPECT_EQ(error,
            "f.txt:5: a second \"----\" in the output of the case at line 1: leave a blank line "
            "after each "
            "output (or enclose an output in \"----\" pairs)");
  EXPECT_FALSE(ParseCases("f.txt", "a\nno separator\n", &error).has_value());
  EXPECT_EQ(error, "f.txt:1: the case has no \"----\" line after its input");
  EXPECT_FALSE(ParseCases("f.txt", "a\n----\n----\nopen\n", &error).has_value());
  EXPECT_FALSE(ParseCases("f.txt", "a b=\"open\n----\n", &error).has_value());
  EXPECT_EQ(error, "f.txt:1: unterminated quote in the command line");
}

TEST(DataDriven, LineDiffMarksRemovedAndAddedLines) {
  EXPECT_EQ(LineDiff("a\nb\nc\n", "a\nx\nc\n"), " a\n-b\n+x\n c\n");
  EXPECT_EQ(LineDiff("", "a\n"), "+a\n");
  EXPECT_EQ(LineDiff("a\n", ""), "-a\n");
}

TEST(DataDriven, FileTestNames) {
  EXPECT_EQ(FileTestName("/x/testdata/per-gpu sharing.txt"), "per_gpu_sharing");
}

}  // namespace
}  // namespace gpushare::datadriven
