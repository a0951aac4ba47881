// CsvFile: a small RFC 4180 reader that remembers where every field came from.
//
// The simulator reads cluster and workload descriptions, and gpushare-scheduler a target
// workload (scheduler/target_workload.h), that people write by hand or export from other tools. A
// malformed row must be reported with file, line and column
// ("pods.csv:17:23: num_gpu: expected an integer, got 'two'"), never dropped silently, so every
// field keeps its line and column. Quoted fields ("a,b", "say ""hi""") and CRLF line ends are
// accepted; a quoted field may not span lines. Messages have their control bytes escaped
// ("got 't\0o'"), and files are read as every input file is (config/file_read.h): a regular
// file of at most kMaxCsvFileBytes, refused from its type or size before anything is read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::config {

// The largest CSV file read (a trace's): 32 MiB, about 400,000 pods (the published Alibaba 2023 pod
// lists have 8,152 in 0.3 to 0.7 MB). Reading takes about 8 bytes of memory per byte of a trace, 22
// for rows of one-character fields (docs/benchmarks.md): at most about 700 MiB.
inline constexpr int64_t kMaxCsvFileBytes = int64_t{32} << 20;

// kInvalidArgument with `message`'s control bytes escaped: the messages of trace files.
Status CsvError(std::string_view message);

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
  // `what` names the file in messages ("pod list CSV"); `example_name` is suggested when a
  // directory is given ("pods.csv").
  static Result<CsvFile> Read(const std::string& path, std::string_view what = "CSV file",
                              std::string_view example_name = "file.csv");

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
  Result<std::string> String(const CsvRow& row, int column, std::string_view name,
                             bool required) const;
  Result<int64_t> Int(const CsvRow& row, int column, std::string_view name, int64_t min,
                      int64_t max) const;
  Result<std::optional<int64_t>> OptionalInt(const CsvRow& row, int column, std::string_view name,
                                             int64_t min, int64_t max) const;

 private:
  std::string path_;
  std::vector<std::string> header_;
  int header_line_ = 0;
  std::vector<CsvRow> rows_;
};

}  // namespace gpushare::config
