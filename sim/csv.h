// CsvFile: a small RFC 4180 reader that remembers where every field came from.
//
// The simulator reads cluster and workload descriptions that people write by hand or export
// from other tools. A malformed row must be reported with file, line and column
// ("pods.csv:17:23: num_gpu: expected an integer, got 'two'"), never dropped silently, so every
// field keeps its line and column. Quoted fields ("a,b", "say ""hi""") and CRLF line ends are
// accepted; a quoted field may not span lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::sim {

struct CsvField {
  std::string text;
  int column = 0;  // 1-based character column where the field starts
};

struct CsvRow {
  int line = 0;  // 1-based
  std::vector<CsvField> fields;
};

class CsvFile {
 public:
  // Parses `content`; `path` is only used in messages. The first non-empty line is the header.
  static Result<CsvFile> Parse(std::string path, std::string_view content);
  static Result<CsvFile> Read(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<CsvRow>& rows() const { return rows_; }

  // Index of a header column, or an error naming the missing column.
  Result<int> Column(std::string_view name) const;
  // -1 when absent.
  int FindColumn(std::string_view name) const;

  // "path:line:column: message" for a field (column -1: the end of the row).
  std::string Where(const CsvRow& row, int column) const;

  // Typed access with located errors. Missing trailing fields are empty.
  Result<std::string> String(const CsvRow& row, int column, std::string_view name, bool required) const;
  Result<int64_t> Int(const CsvRow& row, int column, std::string_view name, int64_t min, int64_t max) const;
  Result<std::optional<int64_t>> OptionalInt(const CsvRow& row, int column, std::string_view name,
                                             int64_t min, int64_t max) const;

 private:
  std::string path_;
  std::vector<std::string> header_;
  int header_line_ = 0;
  std::vector<CsvRow> rows_;
};

}  // namespace gpushare::sim
