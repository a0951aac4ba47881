// YamlReader: strict, total reading of YAML (and JSON) documents into validated values.
//
// Both the sharing config (config/node_config_loader) and the simulated inventory file
// (gpu/file_inventory) are read with it. Every problem is recorded, not just the first: a
// problem is one line that starts with the field path and names what would be accepted,
// followed by where it is in the file when yaml-cpp knows it, e.g.
//   sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60 (config.yaml:7:17)
// Unknown keys are problems at every level, listing the keys that are allowed there. At most 20
// problems are listed, in file order, then "... and K more problems (N in all)"
// (core/problem_list.h), and control bytes in them are escaped.
// Scalars are typed as YAML 1.1 (and Go's yaml) type them: a quoted "10" is a string, not an
// integer, and yes/no/on/off are booleans.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/problem_list.h"

namespace gpushare::yaml {

// The most values (scalars, lists, mappings and aliases) a document may have. yaml-cpp keeps
// about 520 bytes per value, so a 1 MiB list of one-digit items would take 270 MiB once read;
// documents are counted from the parser's events before the tree is built, and the largest tree
// accepted is about 10 MiB (docs/benchmarks.md has the figures). Real configs have a few hundred
// values; an inventory of 64 GPUs with seven MIG devices each has about 8,100.
inline constexpr size_t kMaxYamlValues = 20000;

// Where a node is, as " (source:line:column)", or "" when unknown.
std::string Location(const std::string& source, const YAML::Node& node);

class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}
  // Records "<path>: <message>[ (source:line:col)]".
  void Add(const std::string& path, const std::string& message, const YAML::Node* at = nullptr);
  void AddLine(const std::string& line) { list_.Add(line); }
  bool empty() const { return list_.empty(); }
  const std::string& source() const { return source_; }
  // The problems joined by '\n', those with a position in file order first, then the rest
  // (environment variables, flags, cross-checks) in the order they were found; at most 20,
  // then a count of the rest.
  std::string Joined() const { return list_.Joined(); }

 private:
  std::string source_;
  ProblemList list_;
};

// Parses the first document; YAML syntax errors are recorded with their position, and so is
// a raw control byte (YAML allows only tab, LF and CR; a NUL inside a key once cut the message
// off). A document with more than `max_values` values is refused before its tree is built.
// Returns a null node (IsNull) for an empty document, and an undefined node (!IsDefined) after
// a problem.
YAML::Node ParseDocument(const std::string& text, Problems* problems,
                         size_t max_values = kMaxYamlValues);

// A scalar's kind, as YAML 1.1 types a plain (unquoted) scalar.
bool IsQuoted(const YAML::Node& n);
std::optional<bool> ScalarBool(const YAML::Node& n);    // plain true/false/yes/no/on/off/y/n
std::optional<int64_t> ScalarInt(const YAML::Node& n);  // plain decimal integer
std::string KindName(const YAML::Node& n);  // "a mapping", "a list", "the string \"x\"", ...

// Reads one mapping. Get() marks a key as known; Finish() reports the unknown ones.
class MapReader {
 public:
  // Records a problem (and reads nothing) when `node` is defined but not a mapping.
  MapReader(const YAML::Node& node, std::string path, Problems* problems,
            std::vector<std::string> allowed);
  ~MapReader();
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  std::string PathOf(const std::string& key) const;

  // The value of `key`, or an undefined node when absent. A null value (`key:` with nothing)
  // counts as absent. `key` must be in the allowed list.
  YAML::Node Get(const std::string& key);
  bool Has(const std::string& key) { return Get(key).IsDefined(); }

  // Typed getters: nullopt when absent or wrong (the problem is then recorded).
  std::optional<bool> Bool(const std::string& key);
  std::optional<int64_t> Int(const std::string& key, int64_t min, int64_t max);
  std::optional<std::string> String(const std::string& key);
  std::optional<std::string> Enum(const std::string& key, const std::vector<std::string>& values);

  // Reports unknown and duplicate keys (also done by the destructor if not called).
  void Finish();

  Problems* problems() { return problems_; }

 private:
  YAML::Node node_;
  std::string path_;
  Problems* problems_;
  std::vector<std::string> allowed_;
  bool ok_ = false;
  bool finished_ = false;
};

// "a, b or c"
std::string OneOf(const std::vector<std::string>& values);

}  // namespace gpushare::yaml
