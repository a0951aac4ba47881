#include "config/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

namespace gpushare::yaml {

std::string Location(const std::string& source, const YAML::Node& node) {
  if (!node.IsDefined()) return "";
  YAML::Mark m = node.Mark();
  if (m.is_null() || m.line < 0) return "";
  return " (" + source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) +
         ")";
}

void Problems::Add(const std::string& path, const std::string& message, const YAML::Node* at) {
  std::string line = path.empty() ? message : path + ": " + message;
  uint64_t order = ProblemList::kUnordered;
  if (at != nullptr) {
    line += Location(source_, *at);
    if (at->IsDefined() && !at->Mark().is_null() && at->Mark().line >= 0) {
      order =
          (static_cast<uint64_t>(at->Mark().line) << 32) | static_cast<uint32_t>(at->Mark().column);
    }
  }
  list_.Add(line, order);
}

namespace {

// Counts the values of the first document from the parser's events, without building nodes.
class ValueCounter : public YAML::EventHandler {
 public:
  struct TooMany {};
  explicit ValueCounter(size_t max) : max_(max) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { Count(); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { Count(); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count();
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count();
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count();
  }
  void OnMapEnd() override {}

 private:
  void Count() {
    if (++count_ > max_) throw TooMany{};
  }
  size_t max_;
  size_t count_ = 0;
};

// The first byte YAML does not allow in a stream (c-printable: tab, LF, CR and no other C0
// control byte, no DEL), as "line:column: ...", or "".
std::string ControlByteProblem(const std::string& text) {
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      continue;
    }
    if ((c >= 0x20 && c != 0x7f) || c == '\t' || c == '\r') continue;
    return std::to_string(line) + ":" + std::to_string(i - line_start + 1) + ": control byte " +
           EscapeControlBytes(std::string_view(&text[i], 1)) +
           " is not allowed in YAML (write it as an escape in a double-quoted string)";
  }
  return "";
}

}  // namespace

YAML::Node ParseDocument(const std::string& text, Problems* problems, size_t max_values) {
  if (std::string where = ControlByteProblem(text); !where.empty()) {
    problems->AddLine(problems->source() + ":" + where);
    return YAML::Node(YAML::NodeType::Undefined);
  }
  try {
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      ValueCounter counter(max_values);
      parser.HandleNextDocument(counter);
    }
    return YAML::Load(text);
  } catch (const ValueCounter::TooMany&) {
    problems->AddLine(
        problems->source() + ": more than " + std::to_string(max_values) +
        " YAML values (scalars, lists and mappings); refused before it is read into memory");
    return YAML::Node(YAML::NodeType::Undefined);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = problems->source() + ":" + std::to_string(e.mark.line + 1) + ":" +
              std::to_string(e.mark.column + 1) + ": ";
    } else {
      where = problems->source() + ": ";
    }
    problems->AddLine(where + "not valid YAML or JSON: " + e.msg);
    return YAML::Node(YAML::NodeType::Undefined);
  }
}

bool IsQuoted(const YAML::Node& n) {
  return n.IsScalar() && n.Tag() == "!";
}

std::optional<bool> ScalarBool(const YAML::Node& n) {
  if (!n.IsScalar() || IsQuoted(n)) return std::nullopt;
  static const std::set<std::string> kTrue = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                              "on",   "On",   "ON",   "y",   "Y"};
  static const std::set<std::string> kFalse = {"false", "False", "FALSE", "no", "No", "NO",
                                               "off",   "Off",   "OFF",   "n",  "N"};
  const std::string& s = n.Scalar();
  if (kTrue.count(s)) return true;
  if (kFalse.count(s)) return false;
  return std::nullopt;
}

std::optional<int64_t> ScalarInt(const YAML::Node& n) {
  if (!n.IsScalar() || IsQuoted(n)) return std::nullopt;
  const std::string& s = n.Scalar();
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string KindName(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  if (n.IsNull()) return "null";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (IsQuoted(n)) return "the string \"" + n.Scalar() + "\"";
  if (ScalarBool(n)) return "the boolean " + n.Scalar();
  if (ScalarInt(n)) return "the number " + n.Scalar();
  return "\"" + n.Scalar() + "\"";
}

std::string OneOf(const std::vector<std::string>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += (i + 1 == values.size()) ? " or " : ", ";
    s += values[i];
  }
  return s;
}

MapReader::MapReader(const YAML::Node& node, std::string path, Problems* problems,
                     std::vector<std::string> allowed)
    : node_(node), path_(std::move(path)), problems_(problems), allowed_(std::move(allowed)) {
  if (!node.IsDefined() || node.IsNull()) {
    finished_ = true;  // absent: nothing to read, nothing unknown
    return;
  }
  if (!node.IsMap()) {
    problems_->Add(path_.empty() ? "document" : path_,
                   "must be a mapping (key: value), got " + KindName(node), &node);
    finished_ = true;
    return;
  }
  ok_ = true;
}

MapReader::~MapReader() {
  Finish();
}

std::string MapReader::PathOf(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

YAML::Node MapReader::Get(const std::string& key) {
  if (!ok_) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      if (it->second.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
      return it->second;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::optional<bool> MapReader::Bool(const std::string& key) {
  YAML::Node n = Get(key);
  if (!n.IsDefined()) return std::nullopt;
  auto b = ScalarBool(n);
  if (!b) problems_->Add(PathOf(key), "must be true or false, got " + KindName(n), &n);
  return b;
}

std::optional<int64_t> MapReader::Int(const std::string& key, int64_t min, int64_t max) {
  YAML::Node n = Get(key);
  if (!n.IsDefined()) return std::nullopt;
  auto v = ScalarInt(n);
  if (!v) {
    problems_->Add(PathOf(key),
                   "must be an integer " + std::to_string(min) + ".." + std::to_string(max) +
                       ", got " + KindName(n),
                   &n);
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    problems_->Add(PathOf(key),
                   "must be " + std::to_string(min) + ".." + std::to_string(max) + ", got " +
                       std::to_string(*v),
                   &n);
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> MapReader::String(const std::string& key) {
  YAML::Node n = Get(key);
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsScalar()) {
    problems_->Add(PathOf(key), "must be a string, got " + KindName(n), &n);
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<std::string> MapReader::Enum(const std::string& key,
                                           const std::vector<std::string>& values) {
  YAML::Node n = Get(key);
  if (!n.IsDefined()) return std::nullopt;
  if (n.IsScalar() && std::find(values.begin(), values.end(), n.Scalar()) != values.end()) {
    return n.Scalar();
  }
  problems_->Add(PathOf(key), "must be " + OneOf(values) + ", got " + KindName(n), &n);
  return std::nullopt;
}

void MapReader::Finish() {
  if (finished_) return;
  finished_ = true;
  std::map<std::string, int> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) {
      problems_->Add(path_.empty() ? "document" : path_, "keys must be strings", &it->first);
      continue;
    }
    const std::string& k = it->first.Scalar();
    if (++seen[k] == 2) {
      problems_->Add(PathOf(k), "duplicate key", &it->first);
      continue;
    }
    if (std::find(allowed_.begin(), allowed_.end(), k) == allowed_.end()) {
      std::string keys;
      for (size_t i = 0; i < allowed_.size(); ++i) keys += (i ? ", " : "") + allowed_[i];
      problems_->Add(PathOf(k), "unknown key (allowed here: " + keys + ")", &it->first);
    }
  }
}

}  // namespace gpushare::yaml
