#include "config/csv.h"

#include <charconv>
#include <cmath>

#include "config/file_read.h"
#include "core/problem_list.h"

namespace gpushare::config {

Status CsvError(std::string_view message) {
  return Status::InvalidArgument(EscapeControlBytes(message));
}

namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

// Splits one line into fields; returns an error message on bad quoting.
std::string SplitLine(std::string_view line, std::vector<CsvField>* out) {
  out->clear();
  size_t i = 0;
  while (true) {
    CsvField f;
    f.column = static_cast<int>(i) + 1;
    size_t j = i;
    while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
    if (j < line.size() && line[j] == '"') {
      std::string text;
      size_t k = j + 1;
      bool closed = false;
      while (k < line.size()) {
        if (line[k] == '"') {
          if (k + 1 < line.size() && line[k + 1] == '"') {
            text += '"';
            k += 2;
            continue;
          }
          closed = true;
          ++k;
          break;
        }
        text += line[k++];
      }
      if (!closed) return std::to_string(f.column) + ": unterminated quoted field";
      while (k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
      if (k < line.size() && line[k] != ',')
        return std::to_string(k + 1) + ": unexpected character after a quoted field";
      f.text = std::move(text);
      out->push_back(std::move(f));
      if (k >= line.size()) return {};
      i = k + 1;
      continue;
    }
    size_t comma = line.find(',', i);
    const size_t end = comma == std::string_view::npos ? line.size() : comma;
    const std::string_view raw = line.substr(i, end - i);
    if (raw.find('"') != std::string_view::npos)
      return std::to_string(i + raw.find('"') + 1) + ": stray quote in an unquoted field";
    f.text = Trim(raw);
    out->push_back(std::move(f));
    if (comma == std::string_view::npos) return {};
    i = comma + 1;
  }
}

}  // namespace

Result<CsvFile> CsvFile::Parse(std::string path, std::string_view content) {
  CsvFile f;
  f.path_ = std::move(path);
  size_t pos = 0;
  int line_no = 0;
  bool have_header = false;
  std::vector<CsvField> fields;
  if (content.size() >= 3 && content.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // UTF-8 BOM
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    std::string_view line =
        content.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? content.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) continue;
    const std::string err = SplitLine(line, &fields);
    if (!err.empty()) return CsvError(f.path_ + ":" + std::to_string(line_no) + ":" + err);
    if (!have_header) {
      for (const auto& h : fields) {
        if (h.text.empty())
          return CsvError(f.path_ + ":" + std::to_string(line_no) + ":" + std::to_string(h.column) +
                          ": empty column name in the header");
        f.header_.push_back(h.text);
      }
      f.header_line_ = line_no;
      have_header = true;
      continue;
    }
    if (fields.size() > f.header_.size())
      return CsvError(f.path_ + ":" + std::to_string(line_no) + ":" +
                      std::to_string(fields[f.header_.size()].column) + ": " +
                      std::to_string(fields.size()) + " fields, the header has " +
                      std::to_string(f.header_.size()));
    CsvRow row;
    row.line = line_no;
    row.fields = fields;
    f.rows_.push_back(std::move(row));
  }
  if (!have_header) return CsvError(f.path_ + ":1:1: empty file (no header line)");
  return f;
}

Result<CsvFile> CsvFile::Read(const std::string& path, std::string_view what,
                              std::string_view example_name) {
  GPUSHARE_ASSIGN_OR_RETURN(auto text, ReadInputFile(path, {what, kMaxCsvFileBytes, example_name}));
  return Parse(path, text);
}

int CsvFile::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return static_cast<int>(i);
  return -1;
}

Result<int> CsvFile::Column(std::string_view name) const {
  const int c = FindColumn(name);
  if (c < 0) {
    std::string have;
    for (const auto& h : header_) have += (have.empty() ? "" : ",") + h;
    return CsvError(path_ + ":" + std::to_string(header_line_) + ":1: missing column '" +
                    std::string(name) + "' (header: " + have + ")");
  }
  return c;
}

std::string CsvFile::Where(const CsvRow& row, int column) const {
  int col = 1;
  if (column >= 0 && column < static_cast<int>(row.fields.size())) {
    col = row.fields[column].column;
  } else if (!row.fields.empty()) {
    col = row.fields.back().column + static_cast<int>(row.fields.back().text.size());
  }
  return path_ + ":" + std::to_string(row.line) + ":" + std::to_string(col);
}

Result<std::string> CsvFile::String(const CsvRow& row, int column, std::string_view name,
                                    bool required) const {
  std::string v =
      column < static_cast<int>(row.fields.size()) ? row.fields[column].text : std::string();
  if (required && v.empty())
    return CsvError(Where(row, column) + ": " + std::string(name) + ": must not be empty");
  return v;
}

Result<std::optional<int64_t>> CsvFile::OptionalInt(const CsvRow& row, int column,
                                                    std::string_view name, int64_t min,
                                                    int64_t max) const {
  const std::string v =
      column < static_cast<int>(row.fields.size()) ? row.fields[column].text : std::string();
  if (v.empty()) return std::optional<int64_t>();
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    // Accept integral floats such as "1000.0" (pandas exports); reject anything else.
    double d = 0;
    auto [p2, e2] = std::from_chars(v.data(), v.data() + v.size(), d);
    // Only a finite whole number may be converted, and only inside int64's range (a cast of
    // 3.2e123, inf or nan is undefined behaviour; found by fuzz/fuzz_trace_csv).
    if (e2 != std::errc() || p2 != v.data() + v.size() || !std::isfinite(d) || std::trunc(d) != d)
      return CsvError(Where(row, column) + ": " + std::string(name) +
                      ": expected an integer, got '" + v + "'");
    if (d < -9223372036854775808.0 || d >= 9223372036854775808.0 || d < static_cast<double>(min) ||
        d > static_cast<double>(max))
      return CsvError(Where(row, column) + ": " + std::string(name) + ": must be in " +
                      std::to_string(min) + ".." + std::to_string(max) + ", got " + v);
    out = static_cast<int64_t>(d);
  }
  if (out < min || out > max)
    return CsvError(Where(row, column) + ": " + std::string(name) + ": must be in " +
                    std::to_string(min) + ".." + std::to_string(max) + ", got " + v);
  return std::optional<int64_t>(out);
}

Result<int64_t> CsvFile::Int(const CsvRow& row, int column, std::string_view name, int64_t min,
                             int64_t max) const {
  GPUSHARE_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(row, column, name, min, max));
  if (!v.has_value())
    return CsvError(Where(row, column) + ": " + std::string(name) + ": must not be empty");
  return *v;
}

}  // namespace gpushare::config
