// Data-driven tests: cases kept in text files under tests/testdata/, each a command, its input
// and the output it must produce (the style of etcd-io/raft's interaction tests and
// cockroachdb's datadriven package). docs/testing.md describes the format:
//
//   # a comment (between cases)
//   plan format=table env="KEY=a value" flag=x=1
//   <input lines, up to the separator>
//   ----
//   <expected output, up to the first blank line>
//
// When the output has blank lines of its own, it is enclosed in a second pair of separators:
//   ----
//   ----
//   <output with blank lines>
//   ----
//   ----
//
// RunDataFile runs every case of one file through a handler and compares what the handler
// returns with the expected output; a mismatch fails the running GoogleTest with the file and
// line of the case, the expected and the actual output, and a line diff. With the environment
// variable GPUSHARE_REWRITE=1 the file is rewritten with the actual outputs instead (every
// other byte of the file is kept), so a deliberate change of output is one command and a
// reviewable diff.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpushare::datadriven {

struct Arg {
  std::string key;
  std::string value;  // empty for a bare word
};

struct Case {
  std::string file;       // as given to RunDataFile
  int line = 0;           // 1-based line of the command
  std::string command;    // the first word of the command line
  std::vector<Arg> args;  // the rest: `key`, `key=value` or `key="value with spaces"`
  std::string input;      // the lines between the command and the separator, each ending in '\n'
  std::string expected;   // the expected output, each line ending in '\n' ("" = no output)

  // The values of every argument named `key`, in order (an argument may repeat).
  std::vector<std::string> Values(const std::string& key) const;
  // The value of the argument named `key`; nullopt when absent.
  std::optional<std::string> Value(const std::string& key) const;
  bool Has(const std::string& key) const { return Value(key).has_value(); }
  // "file:line: command ...", for messages.
  std::string Where() const;
};

// Parses the text of a data file. On a syntax error returns nullopt and sets *error to
// "file:line: what is wrong".
std::optional<std::vector<Case>> ParseCases(const std::string& file, const std::string& text,
                                            std::string* error);

// The text of a data file with every case's expected output replaced by outputs[i] (the same
// number as cases); everything else (comments, commands, inputs, blank lines) is kept.
std::string Rewrite(const std::string& text, const std::vector<Case>& cases,
                    const std::vector<std::string>& outputs);

// A line diff of two texts: lines only in `want` start with "-", lines only in `got` with "+",
// common lines with " ".
std::string LineDiff(const std::string& want, const std::string& got);

// True when GPUSHARE_REWRITE is set to 1 (or any value other than "" and "0").
bool RewriteRequested();

// Runs every case of `path` through `handler` (which returns the case's output; a missing final
// newline is added) and compares, failing the running test at each mismatch; or, when
// RewriteRequested(), writes the actual outputs back into the file. Returns the number of cases.
using Handler = std::function<std::string(const Case&)>;
int RunDataFile(const std::string& path, const Handler& handler);

// The data files (*.txt) in `dir`, sorted by name; the test of each is named by FileParamName:
//   INSTANTIATE_TEST_SUITE_P(Testdata, Suite, ::testing::ValuesIn(DataFiles(dir)), FileParamName);
std::vector<std::string> DataFiles(const std::string& dir);
// "per_gpu-sharing.txt" -> "per_gpu_sharing": a GoogleTest parameter name from a file path.
std::string FileTestName(const std::string& path);
std::string FileParamName(const ::testing::TestParamInfo<std::string>& info);

}  // namespace gpushare::datadriven
