#include "tests/datadriven.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace gpushare::datadriven {

namespace {

constexpr const char* kSeparator = "----";

// The lines of `text`; a final '\n' ends the last line rather than starting an empty one.
std::vector<std::string> TextLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string JoinLinesRange(const std::vector<std::string>& lines, size_t begin, size_t end) {
  std::string s;
  for (size_t i = begin; i < end; ++i) s += lines[i] + "\n";
  return s;
}

bool Blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// Splits a command line into the command and its arguments. Values may be double-quoted
// (`env="A=b c"`), with \" and \\ as escapes inside the quotes.
bool ParseCommandLine(const std::string& line, Case* c, std::string* why) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    std::string word;
    bool quoted = false;
    while (i < line.size() && (quoted || (line[i] != ' ' && line[i] != '\t'))) {
      char ch = line[i++];
      if (ch == '"') {
        quoted = !quoted;
      } else if (quoted && ch == '\\' && i < line.size()) {
        word += line[i++];
      } else {
        word += ch;
      }
    }
    if (quoted) {
      *why = "unterminated quote in the command line";
      return false;
    }
    words.push_back(word);
  }
  if (words.empty()) {
    *why = "empty command line";
    return false;
  }
  c->command = words[0];
  for (size_t w = 1; w < words.size(); ++w) {
    const size_t eq = words[w].find('=');
    if (eq == std::string::npos)
      c->args.push_back({words[w], ""});
    else
      c->args.push_back({words[w].substr(0, eq), words[w].substr(eq + 1)});
  }
  return true;
}

// Where each case's output block lies in the file: [begin, end) in lines, from its first
// separator to the line after the output (or the closing separators).
struct Block {
  size_t begin = 0;
  size_t end = 0;
};

std::optional<std::vector<Case>> Parse(const std::string& file,
                                       const std::vector<std::string>& lines,
                                       std::vector<Block>* blocks, std::string* error) {
  std::vector<Case> cases;
  size_t i = 0;
  const size_t n = lines.size();
  auto fail = [&](size_t at, const std::string& why) {
    *error = file + ":" + std::to_string(at + 1) + ": " + why;
    return std::nullopt;
  };
  while (i < n) {
    if (Blank(lines[i]) || lines[i][0] == '#') {
      ++i;
      continue;
    }
    Case c;
    c.file = file;
    c.line = static_cast<int>(i + 1);
    std::string why;
    if (!ParseCommandLine(lines[i], &c, &why)) return fail(i, why);
    size_t sep = i + 1;
    while (sep < n && lines[sep] != kSeparator) ++sep;
    if (sep == n) return fail(i, "the case has no \"----\" line after its input");
    c.input = JoinLinesRange(lines, i + 1, sep);
    Block b{sep, 0};
    if (sep + 1 < n && lines[sep + 1] == kSeparator) {
      size_t end = sep + 2;
      while (end + 1 < n && !(lines[end] == kSeparator && lines[end + 1] == kSeparator)) ++end;
      if (end + 1 >= n)
        return fail(sep, "the output opened with \"----\" twice is never closed the same way");
      c.expected = JoinLinesRange(lines, sep + 2, end);
      b.end = end + 2;
    } else {
      size_t end = sep + 1;
      while (end < n && !Blank(lines[end])) {
        // A "----" here is the next case's, swallowed for want of a blank line before it.
        if (lines[end] == kSeparator) {
          return fail(end, "a second \"----\" in the output of the case at line " +
                               std::to_string(c.line) +
                               ": leave a blank line after each output (or enclose an output in "
                               "\"----\" pairs)");
        }
        ++end;
      }
      c.expected = JoinLinesRange(lines, sep + 1, end);
      b.end = end;
    }
    cases.push_back(std::move(c));
    blocks->push_back(b);
    i = b.end;
  }
  return cases;
}

std::string WithFinalNewline(std::string s) {
  if (!s.empty() && s.back() != '\n') s += '\n';
  return s;
}

}  // namespace

std::vector<std::string> Case::Values(const std::string& key) const {
  std::vector<std::string> v;
  for (const Arg& a : args) {
    if (a.key == key) v.push_back(a.value);
  }
  return v;
}

std::optional<std::string> Case::Value(const std::string& key) const {
  for (const Arg& a : args) {
    if (a.key == key) return a.value;
  }
  return std::nullopt;
}

std::string Case::Where() const {
  std::string s = file + ":" + std::to_string(line) + ": " + command;
  for (const Arg& a : args) s += " " + a.key + (a.value.empty() ? "" : "=" + a.value);
  return s;
}

std::optional<std::vector<Case>> ParseCases(const std::string& file, const std::string& text,
                                            std::string* error) {
  std::vector<Block> blocks;
  return Parse(file, TextLines(text), &blocks, error);
}

std::string Rewrite(const std::string& text, const std::vector<Case>& cases,
                    const std::vector<std::string>& outputs) {
  const std::vector<std::string> lines = TextLines(text);
  std::vector<Block> blocks;
  std::string error;
  if (!Parse("", lines, &blocks, &error) || blocks.size() != cases.size() ||
      outputs.size() != cases.size()) {
    return text;
  }
  std::string out;
  size_t at = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    out += JoinLinesRange(lines, at, blocks[k].begin);
    const std::string o = WithFinalNewline(outputs[k]);
    const bool has_blank_line = o.find("\n\n") != std::string::npos || (!o.empty() && o[0] == '\n');
    if (has_blank_line) {
      out += std::string(kSeparator) + "\n" + kSeparator + "\n" + o + kSeparator + "\n" +
             kSeparator + "\n";
    } else {
      out += std::string(kSeparator) + "\n" + o;
      // The short form ends at a blank line: keep one between this output and what follows.
      if (blocks[k].end < lines.size() && !Blank(lines[blocks[k].end])) out += "\n";
    }
    at = blocks[k].end;
  }
  out += JoinLinesRange(lines, at, lines.size());
  return out;
}

std::string LineDiff(const std::string& want, const std::string& got) {
  const std::vector<std::string> a = TextLines(want), b = TextLines(got);
  const size_t n = a.size(), m = b.size();
  if (n * m > 4'000'000)
    return "(too long to diff: " + std::to_string(n) + " and " + std::to_string(m) + " lines)\n";
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::string d;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      d += " " + a[i++] + "\n";
      ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      d += "-" + a[i++] + "\n";
    } else {
      d += "+" + b[j++] + "\n";
    }
  }
  return d;
}

bool RewriteRequested() {
  const char* v = std::getenv("GPUSHARE_REWRITE");
  return v != nullptr && std::string(v) != "" && std::string(v) != "0";
}

int RunDataFile(const std::string& path, const Handler& handler) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return 0;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::string error;
  auto cases = ParseCases(path, text, &error);
  if (!cases) {
    ADD_FAILURE() << error;
    return 0;
  }
  const bool rewrite = RewriteRequested();
  std::vector<std::string> outputs;
  for (const Case& c : *cases) {
    const std::string got = WithFinalNewline(handler(c));
    outputs.push_back(got);
    if (rewrite || got == c.expected) continue;
    ADD_FAILURE_AT(c.file.c_str(), c.line)
        << c.Where() << "\nthe output differs from the expected output (-expected +got):\n"
        << LineDiff(c.expected, got)
        << "(GPUSHARE_REWRITE=1 rewrites the expected outputs of this file with what the code "
           "produces)";
  }
  if (rewrite) {
    const std::string updated = Rewrite(text, *cases, outputs);
    if (updated != text) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << updated;
      std::cout << "rewrote " << path << "\n";
    }
  }
  return static_cast<int>(cases->size());
}

std::vector<std::string> DataFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string FileTestName(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  for (char& ch : stem) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return stem;
}

std::string FileParamName(const ::testing::TestParamInfo<std::string>& info) {
  return FileTestName(info.param);
}

}  // namespace gpushare::datadriven
